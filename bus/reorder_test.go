package bus

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// delivery is one event sent to the bus at a moment of the test's clock.
type delivery struct {
	at time.Duration // after the start
	ev apollo.Event
}

// reorderScenario gives every task a legal lifecycle and delivers its
// events out of order: some a little late, some after the reorder window,
// some twice, some never.
func reorderScenario(rng *rand.Rand, window time.Duration) (lcs map[key][]apollo.Status, ds []delivery) {
	lcs = map[key][]apollo.Status{}
	for i := range 1 + rng.IntN(12) {
		k := key{tenant: []string{"", "acme"}[rng.IntN(2)], id: fmt.Sprintf("t%d", i)}
		lc := lifecycles[rng.IntN(len(lifecycles))]
		lcs[k] = lc
		for j, st := range lc {
			e := apollo.Event{TaskID: k.id, Tenant: k.tenant, Name: "job_" + k.tenant, Sequence: int64(j + 1), Status: st,
				Ts: t0.UnixMilli() + int64(j)*1000}
			var at time.Duration
			switch x := rng.IntN(10); {
			case x < 2:
				continue // never arrives
			case x < 4:
				at = window + time.Duration(rng.Int64N(int64(window))) // after the window
			default:
				at = time.Duration(rng.Int64N(int64(2 * time.Second)))
			}
			ds = append(ds, delivery{at: at, ev: e})
			if rng.IntN(5) == 0 {
				ds = append(ds, delivery{at: at + time.Duration(rng.Int64N(int64(window))), ev: e}) // resent
			}
		}
	}
	slices.SortStableFunc(ds, func(a, b delivery) int { return int(a.at - b.at) })
	return lcs, ds
}

// The property issue 15 asks for: random orders of legal lifecycles, with
// gaps filled late or never. After the reorder window, every event that
// was answered accepted is applied, every event answered waiting was
// applied (in order, or as a gap) or overtaken by a later event of its
// run that applied, none is rejected or dropped; each run is in the state
// its reporter's last delivered event says; and replaying the log, on one
// goroutine or several, gives the same tasks, histories and metrics.
func TestReorderProperty(t *testing.T) {
	t.Parallel()
	const window = 30 * time.Second
	var waited, gaps int64
	defer func() {
		if waited == 0 || gaps == 0 {
			t.Errorf("%d events waited, %d applied as gaps: the scenarios must exercise both", waited, gaps)
		}
		t.Logf("%d events waited, %d applied as gaps", waited, gaps)
	}()
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 15))
		lcs, ds := reorderScenario(rng, window)
		var agg *metrics.Aggregator
		f := newFixture(t, func(o *Options) {
			o.ReorderWindow = window
			o.HistoryLimit = 8 // as replayInto's
			agg = newAggregator(t, o.Clock)
			o.Observers = []Observer{agg}
		})
		answers := map[key]map[int64][]Result{}
		start := f.clock.Now()
		for _, d := range ds {
			if now := f.clock.Now(); start.Add(d.at).After(now) {
				f.clock.Advance(start.Add(d.at).Sub(now))
			}
			k := key{tenant: d.ev.Tenant, id: d.ev.TaskID}
			if answers[k] == nil {
				answers[k] = map[int64][]Result{}
			}
			o := f.publish(t, d.ev)[0]
			answers[k][d.ev.Sequence] = append(answers[k][d.ev.Sequence], o.Result)
		}
		f.clock.Advance(window + time.Second) // every window has ended
		for k := range lcs {
			f.bus.expireParked(k, f.clock.Now().UnixMilli())
		}
		f.drain()
		st := f.bus.Stats()
		waited, gaps = waited+st.Parked, gaps+st.WaitEnded
		if st.Waiting != 0 || st.Illegal != 0 || st.Refused != 0 || st.Invalid != 0 {
			t.Fatalf("seed %d: after the window %+v", seed, st)
		}
		for k, lc := range lcs {
			last := int64(0)
			for seq := range answers[k] {
				last = max(last, seq)
			}
			got, err := f.bus.Get(k.tenant, k.id)
			if last == 0 {
				if err == nil {
					t.Fatalf("seed %d: %v exists with no event delivered", seed, k)
				}
				continue
			}
			if err != nil {
				t.Fatalf("seed %d: %v: %v", seed, k, err)
			}
			if got.Status != lc[last-1] || got.Sequence != last {
				t.Fatalf("seed %d: %v is %v seq %d; its last delivered event says %v seq %d", seed, k, got.Status, got.Sequence, lc[last-1], last)
			}
			applied := map[int64]apollo.Kind{}
			for _, r := range got.History {
				applied[r.Sequence] = r.Kind
			}
			for seq, rs := range answers[k] {
				for _, r := range rs {
					switch r {
					case Accepted, Held:
						if kind, ok := applied[seq]; !ok || kind != apollo.KindReport {
							t.Fatalf("seed %d: %v seq %d was answered %v and is not in the history %+v", seed, k, seq, r, got.History)
						}
					case Waiting:
						if _, ok := applied[seq]; !ok && !overtaken(got.History, seq) {
							t.Fatalf("seed %d: %v seq %d waited and was lost: history %+v", seed, k, seq, got.History)
						}
					case Duplicate:
					default:
						t.Fatalf("seed %d: %v seq %d answered %v", seed, k, seq, r)
					}
				}
			}
		}
		// A sequential replay and a parallel one of the log give the same.
		live := snapshotTasks(f.bus)
		var liveMetrics bytes.Buffer
		if err := agg.WriteSnapshot(&liveMetrics); err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{0, 3} {
			rp := replayInto(t, f.log.records(), workers)
			if !reflect.DeepEqual(rp.tasks, live) {
				t.Fatalf("seed %d, workers %d: replayed tasks differ\n got %v\nwant %v", seed, workers, rp.tasks, live)
			}
			var b bytes.Buffer
			if err := rp.agg.WriteSnapshot(&b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), liveMetrics.Bytes()) {
				t.Errorf("seed %d, workers %d: replayed metrics differ", seed, workers)
			}
		}
	}
}

// overtaken reports whether a record with a higher sequence than seq was
// applied while seq was not: the run moved past it (a later event that was
// legal applied at once, docs/protocol.md).
func overtaken(h []apollo.Record, seq int64) bool {
	for _, r := range h {
		if r.Sequence > seq && r.Kind.Reported() {
			return true
		}
	}
	return false
}

// snapshotTasks returns every task of b, with its history and the events
// that wait for it, by key.
func snapshotTasks(b *Bus) map[key]apollo.Task {
	out := map[key]apollo.Task{}
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		s.each(func(_ uint64, tk *task) {
			k := tk.key()
			v := tk.view(k)
			v.History = tk.decodeHistory(k)
			if len(tk.waiting()) > 0 {
				v.Name += fmt.Sprintf(" parked %v", tk.waiting())
			}
			out[k] = v
		})
		s.mu.Unlock()
	}
	return out
}

// newAggregator returns a metrics aggregator on clock.
func newAggregator(t *testing.T, clock apollo.Clock) *metrics.Aggregator {
	t.Helper()
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return agg
}
