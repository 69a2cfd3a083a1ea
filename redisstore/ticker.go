package redisstore

import (
	"sync"
	"time"
)

// ticking runs fn every interval in one goroutine until stop, which is
// idempotent, waits for the goroutine, then runs final (if any) once. The
// background loops of the three-process mode (lease, heartbeat, change
// feed) are all this shape.
type ticking struct {
	stopC chan struct{}
	done  chan struct{}
	once  sync.Once
}

func startTicking(every time.Duration, fn func()) *ticking {
	t := &ticking{stopC: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				fn()
			case <-t.stopC:
				return
			}
		}
	}()
	return t
}

// stop ends the loop, waits for it, then calls final once.
func (t *ticking) stop(final func()) {
	t.once.Do(func() {
		close(t.stopC)
		<-t.done
		if final != nil {
			final()
		}
	})
}
