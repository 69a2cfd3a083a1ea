package bus

import (
	"context"
	"errors"
	"sync"

	"github.com/apollo-11/apollo"
)

// maxBatch bounds how many changes a worker takes from one task at a time,
// so that one busy task cannot hold a worker for long.
const maxBatch = 128

// worker delivers queued changes until Stop.
func (b *Bus) worker() {
	defer b.wg.Done()
	var batch []*apollo.Change // reused: one worker delivers one batch at a time
	for {
		rt, ok := b.ready.pop(b.stop)
		if !ok {
			return
		}
		batch = b.deliver(rt, batch)
	}
}

// deliver hands a batch of one task's changes to the observers and
// subscribers, then releases the task's queue or puts it back on the ready
// list. It returns buf for the next call.
func (b *Bus) deliver(rt readyTask, buf []*apollo.Change) []*apollo.Change {
	if b.opts.testGate != nil {
		b.opts.testGate()
	}
	s, t := rt.s, rt.t
	s.mu.Lock()
	before := len(t.q)
	n := min(before, maxBatch)
	batch := append(buf[:0], t.q[:n]...)
	clear(t.q[:n])
	t.q = t.q[n:]
	s.mu.Unlock()

	for _, c := range batch {
		for _, o := range b.opts.Observers {
			o.Apply(c)
		}
		b.publishToSubscribers(c)
	}

	s.mu.Lock()
	overBefore := max(0, before-b.opts.TaskQueueLen)
	overAfter := max(0, before-n-b.opts.TaskQueueLen)
	b.held.Add(-int64(overBefore - overAfter))
	if len(t.q) == 0 {
		t.q = nil // the queue is released; it comes back with the next change
		t.queued = false
		b.queues.Add(-1)
	} else {
		b.ready.push(rt)
	}
	s.mu.Unlock()
	if b.queued.Add(-int64(n)) == 0 {
		b.drainMu.Lock()
		b.drained.Broadcast()
		b.drainMu.Unlock()
	}
	clear(batch) // let delivered changes go
	return batch
}

// waitDrained returns when no change is queued. Callers hold b.pause for
// writing (or the bus is closed), so no new change can be queued meanwhile.
func (b *Bus) waitDrained() {
	b.drainMu.Lock()
	for b.queued.Load() > 0 {
		b.drained.Wait()
	}
	b.drainMu.Unlock()
}

// WaitDrained returns when no change is queued for delivery (every change
// published so far has reached the observers and subscribers), or with
// ctx's error. Unlike Checkpoint it does not stop Publish: a change
// published meanwhile extends the wait. Tests use it to act only once the
// bus has delivered what they published.
func (b *Bus) WaitDrained(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		b.drainMu.Lock()
		b.drained.Broadcast()
		b.drainMu.Unlock()
	})
	defer stop()
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	for b.queued.Load() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.drained.Wait()
	}
	return nil
}

// ErrSlowSubscriber is the reason a subscription is cut off: it did not keep
// up, and must resynchronise from a snapshot of the state.
var ErrSlowSubscriber = errors.New("bus: subscriber too slow, cut off; resynchronise")

// Subscription receives applied changes until it is closed or cut off.
type Subscription struct {
	b      *Bus
	mu     sync.Mutex
	c      chan *apollo.Change
	closed bool
	err    error
}

// Subscribe returns a subscription with room for buffer changes. A
// subscriber that lets its buffer fill is cut off: the bus never waits.
func (b *Bus) Subscribe(buffer int) *Subscription {
	sub := &Subscription{b: b, c: make(chan *apollo.Change, max(buffer, 1))}
	b.subsMu.Lock()
	old := *b.subs.Load()
	next := append(append(make([]*Subscription, 0, len(old)+1), old...), sub)
	b.subs.Store(&next)
	b.subsMu.Unlock()
	b.stats.subscribers.Add(1)
	return sub
}

// C is closed when the subscription ends; Err then says why.
func (s *Subscription) C() <-chan *apollo.Change { return s.c }

// Err is ErrSlowSubscriber if the bus cut the subscription off, nil if it
// was closed by its owner or is still open.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is idempotent.
func (s *Subscription) Close() { s.end(nil) }

func (s *Subscription) end(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.err = true, err
	close(s.c)
	s.mu.Unlock()
	b := s.b
	b.subsMu.Lock()
	old := *b.subs.Load()
	next := make([]*Subscription, 0, len(old))
	for _, o := range old {
		if o != s {
			next = append(next, o)
		}
	}
	b.subs.Store(&next)
	b.subsMu.Unlock()
	b.stats.subscribers.Add(-1)
	if err != nil {
		b.stats.subscribersCut.Add(1)
	}
}

func (b *Bus) publishToSubscribers(c *apollo.Change) {
	for _, s := range *b.subs.Load() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			continue
		}
		select {
		case s.c <- c:
			s.mu.Unlock()
		default:
			s.mu.Unlock()
			s.end(ErrSlowSubscriber)
		}
	}
}
