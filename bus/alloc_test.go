package bus

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/apollo-11/apollo"
)

// Issue 20.2: the changes of one Publish call are allocated together, a
// chunk at a time, not one 480-byte object per event. A batch of running
// events for tasks that exist (two tenants) allocates about one object per
// event (the task's queue, which is released after every delivery), where
// it allocated two or more.
func TestPublishAllocatesChangesTogether(t *testing.T) {
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Log, o.Observers = nil, []Observer{rec} })
	const n = 64
	batch := func(st apollo.Status, seq int64) []apollo.Event {
		evs := make([]apollo.Event, 0, 2*n)
		for _, tenant := range []string{"acme", "globex"} {
			for i := range n {
				e := ev(fmt.Sprintf("a-%02d", i), seq, st)
				e.Tenant = tenant
				evs = append(evs, e)
			}
		}
		return evs
	}
	f.publish(t, batch(apollo.StatusPending, 1)...)
	f.drain()
	running := batch(apollo.StatusRunning, 2)
	out := make([]Outcome, len(running))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := f.bus.Publish(t.Context(), running, out); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	for i, o := range out {
		if o.Result != Accepted {
			t.Fatalf("event %d: %v %v", i, o.Result, o.Err)
		}
	}
	f.drain()
	perEvent := float64(after.Mallocs-before.Mallocs) / float64(len(running))
	t.Logf("%d running events: %.2f allocations per event", len(running), perEvent)
	if perEvent > 1.5 {
		t.Errorf("Publish allocated %.2f objects per event, over 1.5: changes are allocated one by one", perEvent)
	}
	// Every change arrived, right, for its own tenant.
	got := map[string]int{}
	for _, c := range rec.all() {
		if c.Record.Status == apollo.StatusRunning && c.Prev.Status == apollo.StatusPending && c.Task.Status == apollo.StatusRunning && c.Task.Tenant == c.Record.Tenant {
			got[c.Task.Tenant]++
		}
	}
	if got["acme"] != n || got["globex"] != n {
		t.Errorf("running changes by tenant: %v, want %d each", got, n)
	}
}

