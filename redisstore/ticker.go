package redisstore

import (
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// ticking runs fn every interval of clock in one goroutine until stop,
// which is idempotent, waits for the goroutine, then runs final (if any)
// once. The background loops of the three-process mode (lease, heartbeat,
// change feed) are all this shape; they take the clock their owner was
// given, so a test on a fake clock decides when they run.
type ticking struct {
	stopC chan struct{}
	done  chan struct{}
	once  sync.Once
}

func startTicking(clock apollo.Clock, every time.Duration, fn func()) *ticking {
	t := &ticking{stopC: make(chan struct{}), done: make(chan struct{})}
	tk := clock.NewTicker(every) // armed before Start returns: a test may move the clock at once
	go func() {
		defer close(t.done)
		defer tk.Stop()
		for {
			select {
			case <-tk.C():
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
