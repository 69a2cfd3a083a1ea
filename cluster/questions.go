package cluster

import (
	"context"
	"sync"
)

// questionQueue holds the questions a node heard and has not answered
// yet, in the order they came, each stamped as it came (listing.go,
// hear). It grows as questions come, up to maxQueuedQuestions, so a burst
// does not wait in NATS's queue of the subscription, where nothing
// stamps it: before, the node's queue held 256, and the questions after
// them were stamped only when they got into it, their wait in NATS not
// counted, and answered although their askers had stopped waiting
// (TestABurstOfQuestionsIsStampedAsItComes). The messages are held here
// instead of in NATS's queue, so the node holds no more than before.
type questionQueue struct {
	mu    sync.Mutex
	items []question
	more  chan struct{} // a question was put
	room  chan struct{} // a question was taken
}

// maxQueuedQuestions is how many questions one queue holds; past it, the
// callback waits for room and later questions wait unstamped in NATS's
// queue (its limit, half a million messages, drops beyond). A question
// behind this many waits for their answers: 16 384 of even 0.2 ms each
// take over 3 s, past the default wait (QueryTimeout, 2 s).
const maxQueuedQuestions = 1 << 14

func newQuestionQueue() *questionQueue {
	return &questionQueue{more: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// put queues q, waiting while the queue is full, unless done ends first.
func (qq *questionQueue) put(done context.Context, q question) {
	for {
		qq.mu.Lock()
		if len(qq.items) < maxQueuedQuestions {
			qq.items = append(qq.items, q)
			qq.mu.Unlock()
			signal(qq.more)
			return
		}
		qq.mu.Unlock()
		select {
		case <-qq.room:
		case <-done.Done():
			return
		}
	}
}

// take returns the first question queued, waiting for one until done
// ends (false).
func (qq *questionQueue) take(done context.Context) (question, bool) {
	for {
		qq.mu.Lock()
		if len(qq.items) > 0 {
			q := qq.items[0]
			qq.items[0] = question{}
			qq.items = qq.items[1:]
			if len(qq.items) == 0 {
				qq.items = nil // a burst's array goes with it
			}
			qq.mu.Unlock()
			signal(qq.room)
			return q, true
		}
		qq.mu.Unlock()
		select {
		case <-qq.more:
		case <-done.Done():
			return question{}, false
		}
	}
}

// len is how many questions wait.
func (qq *questionQueue) len() int {
	qq.mu.Lock()
	defer qq.mu.Unlock()
	return len(qq.items)
}

// signal wakes a waiter of c, a channel of one, if none is woken yet.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
