package bus

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// randomLog returns n encoded records over many tasks of several tenants:
// sequences in order, repeated, skipping ahead (parked, some until their
// wait ends in a gap record), illegal transitions, the bus's own records
// (timeouts, missed starts, gaps) and, with corrections, operators'
// corrections; some of
// the bus's records and corrections are for tasks that do not exist.
func randomLog(rng *rand.Rand, n int, corrections bool) [][]byte {
	tenants := []string{"", "acme", "beta"}
	seqs := map[key]int64{}
	now := t0.UnixMilli()
	statuses := []apollo.Status{apollo.StatusPending, apollo.StatusPending, apollo.StatusRunning, apollo.StatusRunning,
		apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout, apollo.StatusManualBlocked}
	model, _ := New(Options{Logger: slog.New(slog.DiscardHandler)})
	var out [][]byte
	for range n {
		now += rng.Int64N(40)
		k := key{tenant: tenants[rng.IntN(len(tenants))], id: fmt.Sprintf("t%d", rng.IntN(400))}
		c := seqs[k]
		r := apollo.Record{
			Event: apollo.Event{TaskID: k.id, Tenant: k.tenant, Name: "job_" + k.id[len(k.id)-1:],
				Status: statuses[rng.IntN(len(statuses))], Ts: now - rng.Int64N(5000)},
			Kind: apollo.KindReport, ReceivedAt: now,
		}
		// The bus writes a timeout or a missed start only for a task in the
		// right state (see fire): ask a model bus that replays the log so far.
		s, h := model.locate(k)
		cur := s.get(h, k)
		switch x := rng.IntN(100); {
		case x < 5 && cur != nil && cur.status == apollo.StatusRunning:
			r.Kind, r.Status, r.Sequence = apollo.KindTimeout, apollo.StatusTimeout, cur.seq
		case x < 10 && cur != nil && cur.status == apollo.StatusPending && !cur.late:
			r.Kind, r.Status, r.Sequence = apollo.KindMissedStart, apollo.StatusPending, cur.seq
		case x < 12 && corrections:
			r.Kind, r.Sequence, r.Actor, r.Reason = apollo.KindCorrection, c, "op", "fix"
		case x < 18 && cur != nil && len(cur.waiting()) > 0:
			// The reorder window of the oldest waiting event ended: the bus
			// applies it as a gap (endWaits).
			r = gapRecord(&cur.waiting()[0].rec, cur.seq, now)
		default:
			r.Sequence = max(c+rng.Int64N(5)-1, 1) // repeat, next, or skip ahead
			seqs[k] = max(c, r.Sequence)
		}
		if rng.IntN(4) == 0 {
			r.TimeoutMs = 1 + rng.Int64N(60_000)
		}
		if rng.IntN(4) == 0 {
			r.ScheduledAt = now - rng.Int64N(600_000)
		}
		if rng.IntN(8) == 0 {
			r.Extra = []byte(`{"host":"w1"}`)
		}
		out = append(out, appendRecord(nil, &r))
		if err := model.Replay(uint64(len(out)), out[len(out)-1]); err != nil {
			panic(err)
		}
	}
	return out
}

// orderObserver keeps every task's changes in the order it saw them.
type orderObserver struct {
	mu sync.Mutex
	m  map[key][]string
}

func (o *orderObserver) Apply(c *apollo.Change) {
	s := fmt.Sprintf("%d/%d %s->%s seq %d late %v", c.Record.Kind, c.Record.Sequence, c.Prev.Status, c.Task.Status, c.Task.Sequence, c.BecameLate)
	o.mu.Lock()
	k := key{tenant: c.Task.Tenant, id: c.Task.TaskID}
	o.m[k] = append(o.m[k], s)
	o.mu.Unlock()
}

type replayed struct {
	bus    *Bus
	agg    *metrics.Aggregator
	order  *orderObserver
	tasks  map[key]apollo.Task
	timers []deadline
}

// replayInto replays recs into a new bus, sequentially (workers == 0) or
// with a Replayer on workers goroutines.
func replayInto(t *testing.T, recs [][]byte, workers int) *replayed {
	t.Helper()
	clock := apollo.NewFakeClock(t0.Add(time.Hour))
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ord := &orderObserver{m: map[key][]string{}}
	b, err := New(Options{Clock: clock, Logger: slog.New(slog.DiscardHandler), Observers: []Observer{agg, ord}, HistoryLimit: 8})
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte // reused between records, as wal.Replay does
	if workers == 0 {
		for i, p := range recs {
			buf = append(buf[:0], p...)
			if err := b.Replay(uint64(i+1), buf); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		rp := b.NewReplayer(workers)
		rp.decodeOnWorkers = workers%2 == 1 // both ways
		for i, p := range recs {
			buf = append(buf[:0], p...)
			if err := rp.Add(uint64(i+1), buf); err != nil {
				t.Fatal(err)
			}
			clear(buf)
		}
		if err := rp.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	out := &replayed{bus: b, agg: agg, order: ord, tasks: snapshotTasks(b)}
	for x := range b.timers.all {
		out.timers = append(out.timers, x)
	}
	return out
}

func sortedTimers(ds []deadline) []string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprint(d)
	}
	slices.Sort(s)
	return s
}

// TestReplayerMatchesReplay: a parallel replay of a random log leaves the
// same tasks (status, sequence, history, parked events), the same
// deadlines, counters and LSN, and the same metrics as a replay on one
// goroutine; and every task's changes reach the observers in the same
// order. Run with -race: the observers are called from several workers.
//
// With corrections, the metrics' CostMin and CostMax are not compared: a
// correction that reopens a finished run takes its cost out of the sums,
// but the aggregator cannot take it out of a bucket's min and max, and
// keeps or forgets those bounds depending on the other runs in the bucket
// at that moment, that is on how tasks interleave (as in live operation,
// where the bus's workers deliver different tasks concurrently).
func TestReplayerMatchesReplay(t *testing.T) {
	for seed := range uint64(8) {
		corrections := seed%2 == 1
		t.Run(fmt.Sprint("seed=", seed, ",corrections=", corrections), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			recs := randomLog(rng, 6000, corrections)
			want := replayInto(t, recs, 0)
			t.Logf("%+v", want.bus.Stats())
			for _, workers := range []int{1, 2, 3, 8} {
				got := replayInto(t, recs, workers)
				if len(got.tasks) != len(want.tasks) {
					t.Fatalf("workers=%d: %d tasks, want %d", workers, len(got.tasks), len(want.tasks))
				}
				for k, w := range want.tasks {
					if g := got.tasks[k]; !reflect.DeepEqual(g, w) {
						t.Fatalf("workers=%d: task %v\n got %+v\nwant %+v", workers, k, g, w)
					}
				}
				if !reflect.DeepEqual(got.order.m, want.order.m) {
					t.Errorf("workers=%d: the observers saw tasks' changes in another order", workers)
				}
				if g, w := sortedTimers(got.timers), sortedTimers(want.timers); !reflect.DeepEqual(g, w) {
					t.Errorf("workers=%d: %d deadlines armed, want %d (or they differ)", workers, len(g), len(w))
				}
				gs, ws := got.bus.Stats(), want.bus.Stats()
				if gs != ws {
					t.Errorf("workers=%d: stats\n got %+v\nwant %+v", workers, gs, ws)
				}
				if gs.LastLSN != uint64(len(recs)) || gs.Replayed != int64(len(recs)) {
					t.Errorf("workers=%d: LSN %d, replayed %d; want %d", workers, gs.LastLSN, gs.Replayed, len(recs))
				}
				if !corrections {
					var gb, wb bytes.Buffer
					if err := got.agg.WriteSnapshot(&gb); err != nil {
						t.Fatal(err)
					}
					if err := want.agg.WriteSnapshot(&wb); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(gb.Bytes(), wb.Bytes()) {
						t.Errorf("workers=%d: metrics snapshots differ", workers)
					}
				}
				for _, tenant := range []string{"", "acme", "beta"} {
					for _, w := range []time.Duration{time.Minute, 10 * time.Minute, 24 * time.Hour} {
						q := metrics.Query{Tenant: tenant, Window: w}
						gt, err1 := got.agg.Table(t.Context(), q)
						wt, err2 := want.agg.Table(t.Context(), q)
						if err1 != nil || err2 != nil {
							t.Fatal(err1, err2)
						}
						if corrections {
							for _, tb := range []*metrics.Table{gt, wt} {
								for i := range tb.Rows {
									tb.Rows[i].CostMin, tb.Rows[i].CostMax = 0, 0
								}
							}
						}
						if !reflect.DeepEqual(gt, wt) {
							for i := range gt.Rows {
								if gt.Rows[i] != wt.Rows[i] {
									t.Errorf("workers=%d: tenant %q, window %v: %s\n got %+v\nwant %+v", workers, tenant, w, gt.Names[i], gt.Rows[i], wt.Rows[i])
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestReplayerStopsAtBadRecord: a record that does not decode stops the
// replay; Add and Finish return its error, with its LSN.
func TestReplayerStopsAtBadRecord(t *testing.T) {
	recs := randomLog(rand.New(rand.NewPCG(1, 2)), 20_000, true)
	for i, bad := range [][]byte{{recordVersion, 0}, recs[9000][:len(recs[9000])-1], {9, 0, 1}, {recordVersion, 0, 1, 1, 1, 1, 1, 1, 1, 0, 2, 'x'}} {
		b, _ := New(Options{Logger: slog.New(slog.DiscardHandler)})
		rp := b.NewReplayer(2)
		rp.decodeOnWorkers = i%2 == 1
		var addErr error
		for i, p := range recs {
			if i == 9999 {
				p = bad
			}
			if addErr = rp.Add(uint64(i+1), p); addErr != nil {
				break
			}
		}
		err := rp.Finish()
		if err == nil || !strings.Contains(err.Error(), "record 10000:") {
			t.Fatalf("Finish: %v, want the error of record 10000", err)
		}
		if addErr != nil && addErr.Error() != err.Error() {
			t.Errorf("Add: %v; Finish: %v", addErr, err)
		}
	}
}

func TestRecordHashIsHashKey(t *testing.T) {
	for _, k := range []key{{"", ""}, {"", "t1"}, {"acme", "t1"}, {"acm", "et1"}} {
		r := apollo.Record{Event: apollo.Event{Tenant: k.tenant, TaskID: k.id, Name: "x", Sequence: 300, Status: apollo.StatusRunning}}
		h, err := recordHash(appendRecord(nil, &r))
		if err != nil || h != hashKey(k) {
			t.Errorf("%v: recordHash %x, %v; hashKey %x", k, h, err, hashKey(k))
		}
	}
}
