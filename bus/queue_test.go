package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// Every task's queue is released once it is drained: after 100 000 tasks
// the queue count is back to zero and nothing is waiting.
func TestQueuesReleased(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Observers = []Observer{rec}; o.Log = nil })
	const n = 100_000
	batch := make([]apollo.Event, 0, 300)
	out := make([]Outcome, 300)
	for i := range n {
		id := fmt.Sprintf("q%d", i)
		batch = append(batch, ev(id, 1, apollo.StatusPending), ev(id, 2, apollo.StatusRunning), ev(id, 3, apollo.StatusSuccess))
		if len(batch) == cap(batch) || i == n-1 {
			if err := f.bus.Publish(t.Context(), batch, out); err != nil {
				t.Fatal(err)
			}
			for j := range batch {
				if out[j].Result != Accepted && out[j].Result != Held {
					t.Fatalf("%v: %v", out[j].Result, out[j].Err)
				}
			}
			batch = batch[:0]
		}
	}
	f.drain()
	st := f.bus.Stats()
	if st.Queues != 0 || st.Queued != 0 || st.Holding != 0 {
		t.Fatalf("after %d tasks: %d queues, %d queued, %d holding", n, st.Queues, st.Queued, st.Holding)
	}
	if got := len(rec.all()); got != 3*n {
		t.Fatalf("observer saw %d changes, want %d", got, 3*n)
	}
}

// Observers see each task's changes in order.
func TestObserverOrderPerTask(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Observers = []Observer{rec}; o.Workers = 4 })
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				id := fmt.Sprintf("o%d-%d", g, i)
				f.publish(t, ev(id, 1, apollo.StatusPending))
				f.publish(t, ev(id, 2, apollo.StatusRunning), ev(id, 3, apollo.StatusFailed))
			}
		}()
	}
	wg.Wait()
	f.drain()
	last := map[string]int64{}
	for _, c := range rec.all() {
		if c.Record.Sequence <= last[c.Record.TaskID] {
			t.Fatalf("task %s: sequence %d after %d", c.Record.TaskID, c.Record.Sequence, last[c.Record.TaskID])
		}
		last[c.Record.TaskID] = c.Record.Sequence
		if c.Prev.Status != apollo.StatusNone && !apollo.CanTransition(c.Prev.Status, c.Task.Status) {
			t.Fatalf("illegal change delivered: %v -> %v", c.Prev.Status, c.Task.Status)
		}
	}
	if len(last) != 2000 {
		t.Errorf("%d tasks seen", len(last))
	}
}

// A full queue spills into the holding area and the caller is told to slow
// down; a full holding area refuses visibly; nothing is lost or unbounded.
func TestHoldingArea(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	entered := make(chan struct{}, 16)
	var refusals []Refusal
	var mu sync.Mutex
	f := newFixture(t, func(o *Options) {
		o.Workers = 1
		o.TaskQueueLen = 1
		o.HoldLimit = 2
		o.QueueLimit = 100
		o.testGate = func() { entered <- struct{}{}; <-gate }
		o.OnRefused = func(r Refusal) { mu.Lock(); refusals = append(refusals, r); mu.Unlock() }
	})
	// The first change makes the only worker take task h0 and block in the gate.
	f.publish(t, ev("h0", 1, apollo.StatusPending))
	<-entered
	out := f.publish(t,
		ev("h1", 1, apollo.StatusPending),
		ev("h1", 2, apollo.StatusRunning), // over h1's queue limit: held
		ev("h1", 3, apollo.StatusSuccess), // held
		ev("h2", 1, apollo.StatusPending), // h2's queue is empty: accepted
		ev("h2", 2, apollo.StatusRunning), // over the limit, holding area full: refused
		ev("h2", 3, apollo.StatusFailed),  // would fit, but must not overtake the refused one
	)
	want := []Result{Accepted, Held, Held, Accepted, RetryLater, RetryLater}
	for i, w := range want {
		if out[i].Result != w {
			t.Fatalf("event %d: %v, want %v (%v)", i, out[i].Result, w, out[i].Err)
		}
	}
	if out[4].Err == nil || out[4].Err.Code != apollo.ETOOMANY {
		t.Errorf("refusal error %+v", out[4].Err)
	}
	st := f.bus.Stats()
	if st.Holding != 2 || st.Refused != 2 || st.Held != 2 {
		t.Errorf("stats %+v", st)
	}
	mu.Lock()
	if len(refusals) != 2 || refusals[0].TaskID != "h2" || refusals[1].TaskID != "h2" {
		t.Errorf("refusal hook: %+v", refusals)
	}
	mu.Unlock()
	// The refused event changed nothing; once the worker runs, it is taken.
	if got := f.get(t, "h2"); got.Status != apollo.StatusPending {
		t.Errorf("refused event applied: %v", got.Status)
	}
	close(gate)
	f.drain()
	if o := f.publish(t, ev("h2", 2, apollo.StatusRunning))[0]; o.Result != Accepted {
		t.Errorf("after draining: %v", o.Result)
	}
	f.drain()
	if st := f.bus.Stats(); st.Holding != 0 || st.Queued != 0 {
		t.Errorf("after draining: %+v", st)
	}
}

// A subscriber that does not read is cut off; the bus does not wait for it,
// and other subscribers get everything.
func TestSlowSubscriberCutOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	slow := f.bus.Subscribe(2)
	fast := f.bus.Subscribe(1000)
	for i := range 50 {
		f.publish(t, ev(fmt.Sprintf("s%d", i), 1, apollo.StatusRunning))
	}
	f.drain()
	n := 0
	for range slow.C() {
		n++
	}
	if slow.Err() != ErrSlowSubscriber || n > 2 {
		t.Fatalf("slow subscriber: err %v after %d changes", slow.Err(), n)
	}
	if got := len(fast.C()); got != 50 {
		t.Errorf("fast subscriber has %d changes, want 50", got)
	}
	fast.Close()
	fast.Close()
	if st := f.bus.Stats(); st.Subscribers != 0 || st.SubscribersCut != 1 {
		t.Errorf("stats %+v", st)
	}
}

// Every event answered retry_later is counted and reported, not one per
// task per request (issue 15.7: 60 counted for 11 840 answered).
func TestEveryRefusalCounted(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	var hooked atomic.Int64
	f := newFixture(t, func(o *Options) {
		o.Workers = 1
		o.TaskQueueLen = 1
		o.HoldLimit = 10
		o.QueueLimit = 1000
		o.testGate = func() {
			select {
			case entered <- struct{}{}:
				<-gate
			default:
			}
		}
		o.OnRefused = func(Refusal) { hooked.Add(1) }
	})
	f.publish(t, ev("r0", 1, apollo.StatusPending))
	<-entered // the only worker is held: queues fill, then the holding area
	var evs []apollo.Event
	for i := range 20 {
		id := fmt.Sprintf("r%d", i+1)
		evs = append(evs, ev(id, 1, apollo.StatusPending), ev(id, 2, apollo.StatusRunning), ev(id, 3, apollo.StatusSuccess))
	}
	answered := 0
	for range 3 {
		for _, o := range f.publish(t, evs...) {
			if o.Result == RetryLater {
				answered++
			}
		}
	}
	if answered < 40 {
		t.Fatalf("only %d events refused; the test needs more", answered)
	}
	if st := f.bus.Stats(); st.Refused != int64(answered) {
		t.Errorf("bus.refused %d, but %d events were answered retry_later", st.Refused, answered)
	}
	if n := hooked.Load(); n != int64(answered) {
		t.Errorf("OnRefused called %d times for %d refused events", n, answered)
	}
	close(gate)
}

// WaitDrained returns once every published change has reached the
// observers, and with the context's error while one is still held back.
func TestWaitDrained(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	rec := &recorder{}
	f := newFixture(t, func(o *Options) {
		o.Observers = []Observer{rec}
		o.testGate = func() { <-gate }
	})
	f.publish(t, ev("w1", 1, apollo.StatusPending), ev("w2", 1, apollo.StatusPending))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.bus.WaitDrained(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitDrained with changes held back: %v", err)
	}
	close(gate)
	if err := f.bus.WaitDrained(testwait.Context(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.all()); n != 2 {
		t.Errorf("observer saw %d changes after WaitDrained, want 2", n)
	}
}
