package bus

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/apollo-11/apollo"
)

// Issue 20.2: the changes of one Publish call are allocated together, a
// chunk at a time, not one 408-byte object per event. A batch of running
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

// Issue 20.2: a busy second's deadlines are kept in chunks that are never
// copied; growing one slice per second allocated about twice what it kept.
// due still hands every deadline back, each slot's in the order pushed.
func TestDeadlineSlotsGrowWithoutCopying(t *testing.T) {
	d := newDeadlines()
	const n = 20_000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		tenant := []string{"acme", "globex"}[i%2]
		d.push(7, deadline{at: 5_000 + int64(i%2)*1000, k: key{tenant: tenant, id: "t"}, kind: dTimeout, seq: int64(i)})
	}
	runtime.ReadMemStats(&after)
	kept := uint64(n) * uint64(unsafe.Sizeof(deadline{}))
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d deadlines in 2 slots: %d bytes allocated, %d kept", n, allocated, kept)
	if allocated > kept*5/4 {
		t.Errorf("%d deadlines allocated %d bytes, over 1.25× the %d they take: slots copy as they grow", n, allocated, kept)
	}
	if d.len() != n {
		t.Fatalf("len %d, want %d", d.len(), n)
	}
	slots, next := d.due(5_000)
	due := flatten(slots)
	if len(due) != n/2 || next != 6_000 {
		t.Fatalf("due at 5 s: %d deadlines, next %d; want %d, 6000", len(due), next, n/2)
	}
	slots, next = d.due(6_000)
	due = flatten(slots)
	if len(due) != n/2 || next != 0 || d.len() != 0 {
		t.Fatalf("due at 6 s: %d deadlines, next %d, %d left; want %d, 0, 0", len(due), next, d.len(), n/2)
	}
	for i, x := range due {
		if x.seq != int64(2*i+1) || x.k.tenant != "globex" {
			t.Fatalf("deadline %d of the second slot: %+v, want seq %d of globex, in push order", i, x, 2*i+1)
		}
	}
}

// countLog is a Log that keeps only the number of records: it allocates
// nothing, so what a test counts is the bus's.
type countLog struct{ n atomic.Uint64 }

func (l *countLog) Append([]byte) (uint64, error)      { return l.n.Add(1), nil }
func (l *countLog) Wait(context.Context, uint64) error { return nil }

// Issue 20.3: a Publish of one event (one event per request, as a cron
// line or apollo report sends it) reuses the buffer it encodes the log
// record in; a fresh one was regrown three times for every call.
func TestPublishOneEventAllocations(t *testing.T) {
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Log, o.Observers = &countLog{}, []Observer{rec} })
	const n = 50
	for _, tenant := range []string{"acme", "globex"} {
		for i := range n {
			e := ev(fmt.Sprintf("o-%02d", i), 1, apollo.StatusPending)
			e.Tenant = tenant
			f.publish(t, e)
		}
	}
	f.drain()
	out := make([]Outcome, 1)
	var mallocs uint64
	for _, tenant := range []string{"acme", "globex"} {
		for i := range n {
			e := []apollo.Event{ev(fmt.Sprintf("o-%02d", i), 2, apollo.StatusRunning)}
			e[0].Tenant = tenant
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if err := f.bus.Publish(t.Context(), e, out); err != nil || out[0].Result != Accepted {
				t.Fatalf("%s %s: %v %+v", tenant, e[0].TaskID, err, out[0])
			}
			runtime.ReadMemStats(&after)
			mallocs += after.Mallocs - before.Mallocs
		}
	}
	f.drain()
	perCall := float64(mallocs) / (2 * n)
	t.Logf("one running event per Publish: %.2f allocations per call", perCall)
	// The change and the task's queue are the event's own.
	if perCall > 3 {
		t.Errorf("a Publish of one event allocated %.2f objects, over 3", perCall)
	}
	if got := len(rec.all()); got != 4*n {
		t.Errorf("%d changes delivered, want %d", got, 4*n)
	}
}

// flatten lists the deadlines of slots in the order they fire.
func flatten(slots []*slot) []deadline {
	var out []deadline
	for _, sl := range slots {
		for x := range sl.all {
			out = append(out, x)
		}
	}
	return out
}
