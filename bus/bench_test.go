package bus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/proccpu"
	"github.com/apollo-11/apollo/metrics"
)

// BenchmarkPublish measures decided events per second through Publish with
// no log (the log's cost is measured in package wal), in batches of 100 as
// the HTTP API hands them over: each run reports pending, running, success.
// Events are made before the timer starts, so the bus alone is measured.
func BenchmarkPublish(b *testing.B) {
	bus, _ := New(Options{})
	bus.Start(context.Background())
	defer bus.Stop(context.Background())
	evs := make([]apollo.Event, b.N+100)
	statuses := [3]apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess}
	for i := range evs {
		evs[i] = apollo.Event{TaskID: fmt.Sprintf("task-%d", i/3), Name: "job", Sequence: int64(i%3 + 1),
			Status: statuses[i%3], Ts: 1e12 + int64(i)}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		out := make([]Outcome, 100)
		n := 0
		for pb.Next() {
			if n++; n == 100 { // one batch per 100 iterations; a task's events stay in one batch
				i := int(next.Add(1)-1) * 99
				bus.Publish(context.Background(), evs[i:i+99], out)
				n = 1
			}
		}
	})
	b.StopTimer()
	bus.Checkpoint(func(uint64) error { return nil }) // the workers' share counts too
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMemoryPerTask measures the heap held per tracked task: a task
// that reported pending, running and success (the typical run), with its
// history, in memory; at 100 000 and 1 000 000 tasks (docs/architecture.md,
// "Numbers we hold ourselves to": ≤ 512 B per task).
func BenchmarkMemoryPerTask(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) { memoryPerTask(b, n) })
	}
}

func memoryPerTask(b *testing.B, n int) {
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		bus, _ := New(Options{Workers: 1})
		bus.Start(context.Background())
		out := make([]Outcome, 3)
		for i := range n {
			id := fmt.Sprintf("nightly-etl-%07d", i)
			evs := []apollo.Event{
				{TaskID: id, Name: "nightly_etl", Sequence: 1, Status: apollo.StatusPending, Ts: 1e12, ScheduledAt: 1e12},
				{TaskID: id, Name: "nightly_etl", Sequence: 2, Status: apollo.StatusRunning, Ts: 1e12 + 10},
				{TaskID: id, Name: "nightly_etl", Sequence: 3, Status: apollo.StatusSuccess, Ts: 1e12 + 5000},
			}
			bus.Publish(context.Background(), evs, out)
		}
		bus.Checkpoint(func(uint64) error { return nil })
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "bytes/task")
		runtime.KeepAlive(bus)
		bus.Stop(context.Background())
		b.StartTimer()
	}
}

// BenchmarkReplay replays 200 000 encoded records (each a new task's
// pending, or runs reporting pending, running, success) into a bus with a
// metrics aggregator, as start-up recovery does without its log reading:
// on one goroutine (seq), or with a Replayer decoding on the reading
// goroutine (par) or on its workers (par-workerdecode). One op is one
// replay.
func BenchmarkReplay(b *testing.B) {
	const n = 200_000
	for _, mix := range []string{"pending", "lifecycle"} {
		recs := make([][]byte, n)
		statuses := [3]apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess}
		for j := range recs {
			id, seq, st := j, 1, apollo.StatusPending
			if mix == "lifecycle" {
				id, seq, st = j/3, j%3+1, statuses[j%3]
			}
			r := apollo.Record{Event: apollo.Event{TaskID: fmt.Sprintf("t%d", id), Name: fmt.Sprintf("job_%d", id%100),
				Sequence: int64(seq), Status: st, Ts: 1e12 + int64(j)}, ReceivedAt: 1e12 + int64(j)}
			recs[j] = appendRecord(nil, &r)
		}
		for _, mode := range []string{"seq", "par", "par-workerdecode"} {
			b.Run(mix+"/"+mode, func(b *testing.B) {
				b.ReportAllocs()
				var cpu time.Duration // the process's, GC included; moves less with the machine's load than wall time
				for b.Loop() {
					b.StopTimer()
					agg, _ := metrics.New(metrics.Options{Clock: apollo.NewFakeClock(time.UnixMilli(1e12))})
					bus, _ := New(Options{Observers: []Observer{agg}, MaxTasks: 10_000_000})
					b.StartTimer()
					cpu0 := proccpu.Used()
					if mode == "seq" {
						for i, p := range recs {
							if err := bus.Replay(uint64(i+1), p); err != nil {
								b.Fatal(err)
							}
						}
						cpu += proccpu.Used() - cpu0
						continue
					}
					rp := bus.NewReplayer(0)
					rp.decodeOnWorkers = mode == "par-workerdecode"
					for i, p := range recs {
						if err := rp.Add(uint64(i+1), p); err != nil {
							b.Fatal(err)
						}
					}
					if err := rp.Finish(); err != nil {
						b.Fatal(err)
					}
					cpu += proccpu.Used() - cpu0
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n*b.N), "cpu-µs/event")
			})
		}
	}
}

// BenchmarkRecordMissed measures recording the missed runs one
// evaluation cycle finds when 100 000 expectations are due at the rate of
// BenchmarkTick100k in package expect (670 a tick): one call with their
// pending runs and missed starts, each a run of its own, with the log in
// memory (its fsync is one per call, measured in package wal).
func BenchmarkRecordMissed(b *testing.B) {
	bus, _ := New(Options{Log: &memLog{}, HistoryLimit: 4})
	bus.Start(context.Background())
	defer bus.Stop(context.Background())
	const perTick = 670
	slot := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	ms := make([]Missed, perTick)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range ms {
			ms[k] = Missed{Tenant: fmt.Sprintf("t%d", k%10), Job: fmt.Sprintf("job_%d", k), Slot: slot.Add(time.Duration(i) * 10 * time.Second)}
		}
		if _, err := bus.RecordMissed(context.Background(), ms); err != nil {
			b.Fatal(err)
		}
	}
	bus.Checkpoint(func(uint64) error { return nil }) // the observers' share counts too
}

// BenchmarkTaskListInsert puts 1 M tasks into a tenant's list in the order
// concurrent batches (or a replay's workers) bring them: by createdAt and
// ID, each run of 64 shuffled, so most go just before the end. One op is
// one insert.
func BenchmarkTaskListInsert(b *testing.B) {
	const n = 1 << 20
	ts := make([]*task, n)
	for i := range ts {
		ts[i] = &task{id: fmt.Sprintf("scale-%07d", i), createdAt: int64(i / 300)}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i += 64 {
		w := ts[i:min(i+64, n)]
		rng.Shuffle(len(w), func(a, c int) { w[a], w[c] = w[c], w[a] })
	}
	b.ResetTimer()
	var l taskList
	for i := 0; b.Loop(); i++ {
		if i%n == 0 {
			l = taskList{}
		}
		l.insert(ts[i%n])
	}
}

// BenchmarkLateness measures the thresholds' lookup that every applied
// event makes, with a scheduler's jobs file of 0, 100 and 1 000 jobs (each
// job's late_after is an entry of its own) beside 10 prefixes.
func BenchmarkLateness(b *testing.B) {
	for _, jobs := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			var ls []Lateness
			for i := range 10 {
				ls = append(ls, Lateness{Prefix: fmt.Sprintf("team%d_", i), StartAfter: time.Minute})
			}
			for i := range jobs {
				ls = append(ls, Lateness{Job: fmt.Sprintf("job_%d", i), Tenant: "acme", StartAfter: time.Hour})
			}
			bus, _ := New(Options{Lateness: ls})
			names := []string{"team3_etl", "job_7", "other"}
			b.ResetTimer()
			for i := range b.N {
				if l := bus.lateness("acme", names[i%3]); l.StartAfter == 0 {
					b.Fatal("no threshold")
				}
			}
		})
	}
}

// BenchmarkSettle measures what a read that waits for the observers
// (Bus.Settle: GET /api/v1/metrics, the jobs' health, the learner's
// proposals) adds: one event published and its change delivered to an
// observer, with a log and a live observer as in the server, alone
// (publish) and followed by Settle (publish+settle); and Settle on a bus
// with nothing to wait for (idle). The two first side by side show the
// wait for delivery; idle, the cost when the read comes long after.
func BenchmarkSettle(b *testing.B) {
	for _, mode := range []string{"publish", "publish+settle", "idle"} {
		b.Run(mode, func(b *testing.B) {
			f := newFixture(b, func(o *Options) { o.Live = []Observer{&nopObserver{}} })
			out := make([]Outcome, 1)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if mode != "idle" {
					ev := apollo.Event{TaskID: fmt.Sprintf("t%d", i), Name: "job", Sequence: 1, Status: apollo.StatusRunning, Ts: t0.UnixMilli()}
					if err := f.bus.Publish(ctx, []apollo.Event{ev}, out); err != nil || out[0].Result != Accepted {
						b.Fatal(out, err)
					}
				}
				if mode != "publish" {
					if err := f.bus.Settle(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

type nopObserver struct{}

func (nopObserver) Apply(*apollo.Change) {}
