package cluster

import (
	"context"
	"sync"
)

// lastProbe asks JetStream for a partition's last stored message one
// question at a time, shared: a caller that comes while a question is
// out waits for the next one, which every caller that came meanwhile
// shares. Every question a caller gets its answer from was sent after
// the caller came, so the answer covers everything stored before it came
// (what catchUp needs), and a partition costs at most one request out at
// a time, however many listings and ping ends ask of it at once.
type lastProbe struct {
	mu      sync.Mutex
	running *probe // the question out; nil: none
	next    *probe // the question the callers waiting for running share; nil: none yet

	waiting func() // test seam: called, with mu held, when a caller waits behind running
}

type probe struct {
	done chan struct{}
	seq  uint64
	err  error
}

// last returns the answer of a question sent after the call began: ask's,
// run by this caller or by another one.
func (l *lastProbe) last(ctx context.Context, ask func(context.Context) (uint64, error)) (uint64, error) {
	l.mu.Lock()
	if l.next == nil {
		l.next = &probe{done: make(chan struct{})}
	}
	mine := l.next
	for l.running != nil {
		cur := l.running
		if l.waiting != nil {
			l.waiting()
		}
		l.mu.Unlock()
		select {
		case <-cur.done:
		case <-mine.done:
			return mine.seq, mine.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		l.mu.Lock()
	}
	if l.next != mine { // another caller sent it meanwhile, and it has ended
		l.mu.Unlock()
		<-mine.done
		return mine.seq, mine.err
	}
	l.running, l.next = mine, nil
	l.mu.Unlock()
	mine.seq, mine.err = ask(ctx)
	l.mu.Lock()
	l.running = nil
	l.mu.Unlock()
	close(mine.done)
	return mine.seq, mine.err
}
