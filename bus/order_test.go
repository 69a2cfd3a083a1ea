package bus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// lifecycles are legal event sequences a task may report.
var lifecycles = [][]apollo.Status{
	{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess},
	{apollo.StatusPending, apollo.StatusRunning, apollo.StatusFailed},
	{apollo.StatusRunning, apollo.StatusTimeout},
	{apollo.StatusPending, apollo.StatusFailed},
	{apollo.StatusPending, apollo.StatusManualBlocked, apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess},
	{apollo.StatusManualBlocked, apollo.StatusPending, apollo.StatusRunning, apollo.StatusManualBlocked},
	{apollo.StatusRunning},
	{apollo.StatusPending, apollo.StatusRunning, apollo.StatusManualBlocked, apollo.StatusPending, apollo.StatusTimeout},
}

// finalState publishes evs one by one into a fresh bus and returns the
// status and sequence of every task.
func finalState(t testing.TB, evs []apollo.Event) map[string][2]int64 {
	b, err := New(Options{Workers: 1, Clock: apollo.NewFakeClock(t0)}) // no deadline passes
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	defer b.Stop(context.Background())
	out := make([]Outcome, 1)
	for _, e := range evs {
		if err := b.Publish(context.Background(), []apollo.Event{e}, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Result == RetryLater {
			t.Fatalf("event refused: %v", out[0].Err)
		}
	}
	got := map[string][2]int64{}
	for _, e := range evs {
		tk, err := b.Get("", e.TaskID)
		if err != nil {
			got[e.TaskID] = [2]int64{0, 0}
			continue
		}
		got[e.TaskID] = [2]int64{int64(tk.Status), tk.Sequence}
	}
	return got
}

// shuffled returns the events of n random tasks, in order and then
// shuffled with duplicates.
func shuffled(r *rand.Rand, n int) (inOrder, mixed []apollo.Event) {
	for i := range n {
		lc := lifecycles[r.IntN(len(lifecycles))]
		id := fmt.Sprintf("task%d", i)
		for j, st := range lc {
			inOrder = append(inOrder, apollo.Event{TaskID: id, Sequence: int64(j + 1), Status: st, Ts: t0.UnixMilli() + int64(j)})
		}
	}
	mixed = append(mixed, inOrder...)
	for range r.IntN(len(inOrder) + 1) { // duplicates
		mixed = append(mixed, inOrder[r.IntN(len(inOrder))])
	}
	r.Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	return inOrder, mixed
}

// Delivering a task's events in any order, with any repetition, leaves it
// in the state that in-order delivery does (docs/protocol.md).
func TestOutOfOrderGivesSameFinalState(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 42))
		inOrder, mixed := shuffled(r, 1+r.IntN(6))
		want := finalState(t, inOrder)
		got := finalState(t, mixed)
		for id, w := range want {
			if got[id] != w {
				t.Fatalf("seed %d task %s: got status %v seq %d, in order %v seq %d\nmixed: %v",
					seed, id, apollo.Status(got[id][0]), got[id][1], apollo.Status(w[0]), w[1], mixed)
			}
		}
	}
}

func FuzzOutOfOrder(f *testing.F) {
	f.Add(uint64(1), uint8(3))
	f.Add(uint64(99), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		r := rand.New(rand.NewPCG(seed, 7))
		inOrder, mixed := shuffled(r, 1+int(n%8))
		want := finalState(t, inOrder)
		got := finalState(t, mixed)
		for id, w := range want {
			if got[id] != w {
				t.Fatalf("task %s: got %v, in order %v", id, got[id], w)
			}
		}
	})
}

// An event that waits says so; when the reorder window ends without the
// missing events, it applies anyway and the history says how many never
// came (issue 15.1: it used to be dropped 30 s after "accepted").
func TestOutOfOrderWaitEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// success (4) before running (2, 3): it waits.
	if o := f.publish(t, ev("w1", 1, apollo.StatusPending), ev("w1", 4, apollo.StatusSuccess)); o[1].Result != Waiting {
		t.Fatalf("waiting event: %v", o[1])
	}
	if o := f.publish(t, ev("w1", 4, apollo.StatusSuccess))[0]; o.Result != Waiting {
		t.Fatalf("the same event resent while it waits: %v", o)
	}
	if st := f.bus.Stats(); st.Waiting != 1 || st.Parked != 1 {
		t.Fatalf("waiting = %d, parked = %d", st.Waiting, st.Parked)
	}
	if n := len(f.log.records()); n != 2 {
		t.Errorf("%d records logged; the resent copy must not be logged again", n)
	}
	// Nothing fills the gap: when the window ends, the event applies.
	f.clock.Advance(f.bus.opts.ReorderWindow)
	f.bus.expireParked(key{id: "w1"}, f.clock.Now().UnixMilli())
	if st := f.bus.Stats(); st.Waiting != 0 || st.WaitEnded != 1 {
		t.Fatalf("after the window: %+v", st)
	}
	got := f.get(t, "w1")
	if got.Status != apollo.StatusSuccess || got.Sequence != 4 || got.FinishedAt != ev("w1", 4, 0).Ts {
		t.Fatalf("after the window: %+v", got)
	}
	last := got.History[len(got.History)-1]
	if last.Kind != apollo.KindGap || last.Reason != "2 earlier events never arrived" || last.Sequence != 4 {
		t.Errorf("the history does not mark the gap: %+v", last)
	}
	// The missing events, arriving later still, are duplicates.
	if o := f.publish(t, ev("w1", 2, apollo.StatusRunning))[0]; o.Result != Duplicate {
		t.Errorf("a missing event after the gap: %v", o.Result)
	}
}

// The deadline loop ends a wait by itself, and an event that arrives after
// the window ended (before the loop got to it) finds the gap applied.
func TestWaitEndsBeforeTheNextEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.publish(t, ev("x1", 1, apollo.StatusRunning), ev("x1", 3, apollo.StatusPending)) // 2 (manual_blocked) is missing
	f.clock.Advance(f.bus.opts.ReorderWindow + time.Second)
	// Before the deadline loop runs: the next event sees the gap applied first.
	if o := f.publish(t, ev("x1", 4, apollo.StatusRunning))[0]; o.Result != Accepted {
		t.Fatalf("the event after the window: %v %v", o.Result, o.Err)
	}
	got := f.get(t, "x1")
	kinds := ""
	for _, r := range got.History {
		kinds += fmt.Sprintf(" %v/%v/%d", r.Kind, r.Status, r.Sequence)
	}
	if got.Status != apollo.StatusRunning || got.Sequence != 4 || kinds != " report/running/1 gap/pending/3 report/running/4" {
		t.Fatalf("status %v seq %d, history%s", got.Status, got.Sequence, kinds)
	}
	// Left alone, the deadline loop applies a wait that ended.
	sub := f.bus.Subscribe(100)
	defer sub.Close()
	f.publish(t, ev("x2", 1, apollo.StatusRunning), ev("x2", 3, apollo.StatusPending))
	f.clock.Advance(f.bus.opts.ReorderWindow + time.Second)
	c := waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.TaskID == "x2" && c.Record.Kind == apollo.KindGap })
	if c.Task.Status != apollo.StatusPending || c.Record.Reason != "1 earlier event never arrived" {
		t.Errorf("the gap change: %+v", c)
	}
}

// An event that waits is dropped, counted as illegal, when an event that
// does arrive makes it illegal for good: running, then 3 pending waiting
// for 2, then 2 success ends the run.
func TestWaitingEventMadeIllegal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if o := f.publish(t, ev("y1", 1, apollo.StatusRunning), ev("y1", 3, apollo.StatusPending)); o[1].Result != Waiting {
		t.Fatalf("3 pending: %v", o[1].Result)
	}
	f.publish(t, ev("y1", 2, apollo.StatusSuccess))
	if got := f.get(t, "y1"); got.Status != apollo.StatusSuccess || got.Sequence != 2 {
		t.Fatalf("task %+v", got)
	}
	if st := f.bus.Stats(); st.Waiting != 0 || st.Illegal != 1 {
		t.Errorf("stats %+v", st)
	}
}
