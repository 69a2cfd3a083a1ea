package bus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

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
	b, err := New(Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	defer b.Stop()
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
			inOrder = append(inOrder, apollo.Event{TaskID: id, Sequence: int64(j + 1), Status: st, Ts: 1e12 + int64(j)})
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

func TestOutOfOrderWaitExpires(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// success (3) before running (2): it waits.
	if o := f.publish(t, ev("w1", 1, apollo.StatusPending), ev("w1", 3, apollo.StatusSuccess)); o[1].Result != Accepted {
		t.Fatalf("waiting event: %v", o[1])
	}
	if st := f.bus.Stats(); st.Waiting != 1 {
		t.Fatalf("waiting = %d", st.Waiting)
	}
	// Nothing fills the gap: after the reorder window it is dropped.
	f.clock.Advance(f.bus.opts.ReorderWindow + 1e6)
	f.publish(t, ev("w2", 1, apollo.StatusPending)) // any later decision sees the clock
	f.bus.expireParked(key{id: "w1"}, f.clock.Now().UnixMilli())
	if st := f.bus.Stats(); st.Waiting != 0 || st.ParkExpired != 1 {
		t.Fatalf("after the window: %+v", st)
	}
	if got := f.get(t, "w1"); got.Status != apollo.StatusPending {
		t.Errorf("an expired event was applied: %v", got.Status)
	}
	// The late running event now applies alone; the dropped success stays dropped.
	f.publish(t, ev("w1", 2, apollo.StatusRunning))
	if got := f.get(t, "w1"); got.Status != apollo.StatusRunning {
		t.Errorf("status %v, want running", got.Status)
	}
}
