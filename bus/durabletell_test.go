package bus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// heldLog is a Log whose records become durable only once released: each
// Wait tells waits that it is waiting, then blocks until release.
type heldLog struct {
	memLog
	waits    chan struct{}
	released chan struct{}
	once     sync.Once
}

func (l *heldLog) Wait(ctx context.Context, lsn uint64) error {
	l.waits <- struct{}{}
	select {
	case <-l.released:
		return l.memLog.Wait(ctx, lsn)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *heldLog) release() { l.once.Do(func() { close(l.released) }) }

// Nothing is told before its record is durable: while the log has not
// made two tenants' events durable, no observer, live observer or
// subscriber has heard of them; once it has, all do. Before, a worker
// handed a change on as soon as it was decided, while its record could
// still be in the log's buffer: the event rules notified, and the stream
// showed, a decision that a kill -9 then took back
// (docs/architecture.md, "What the event rules had not heard of is news
// after a crash").
func TestNothingIsToldBeforeItsRecordIsDurable(t *testing.T) {
	log := &heldLog{waits: make(chan struct{}, 16), released: make(chan struct{})}
	obs, live := &recorder{}, &recorder{}
	f := newFixture(t, func(o *Options) {
		o.Log = log
		o.Observers = []Observer{obs}
		o.Live = []Observer{live}
	})
	t.Cleanup(log.release)
	sub := f.bus.Subscribe(16)
	defer sub.Close()
	published := make(chan []Outcome, 1)
	acme, globex := ev("a-1", 1, apollo.StatusRunning), ev("g-1", 1, apollo.StatusRunning)
	acme.Tenant, globex.Tenant = "acme", "globex"
	go func() {
		out := make([]Outcome, 2)
		if err := f.bus.Publish(context.Background(), []apollo.Event{acme, globex}, out); err != nil {
			out[0].Err = &apollo.Error{Message: err.Error()}
		}
		published <- out
	}()
	// Publish waits for its answer, and each worker that took a task's
	// changes waits before it tells them: three waits at least.
	for i := range 3 {
		select {
		case <-log.waits:
		case <-testwait.Context(t).Done():
			t.Fatalf("%d waits for the log, want 3 (Publish's and a worker's per task); told meanwhile: %d changes to observers, %d to live ones",
				i, len(obs.all()), len(live.all()))
		}
	}
	if n, m := len(obs.all()), len(live.all()); n != 0 || m != 0 {
		t.Fatalf("told before durable: %d changes to observers, %d to live ones", n, m)
	}
	select {
	case c := <-sub.C():
		t.Fatalf("a subscriber was told of %s before it was durable", c.Task.TaskID)
	default:
	}
	log.release()
	if out := <-published; out[0].Result != Accepted || out[1].Result != Accepted {
		t.Fatalf("Publish: %+v", out)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		c := waitChange(t, sub, func(*apollo.Change) bool { return true })
		seen[c.Task.Tenant] = true
	}
	for deadline := time.Now().Add(testwait.Timeout(t)); len(obs.all()) != 2 || len(live.all()) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("told after durable: %d changes to observers, %d to live ones, want 2 each", len(obs.all()), len(live.all()))
		}
		time.Sleep(time.Millisecond) // polled: a worker tells its batch after the subscriber's
	}
}
