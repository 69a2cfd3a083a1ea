package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

var benchNow = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

func benchAggregator(b *testing.B) (*metrics.Aggregator, *apollo.FakeClock) {
	b.Helper()
	clock := apollo.NewFakeClock(benchNow)
	a, err := metrics.New(metrics.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return a, clock
}

// run returns the two changes of one run of name: it starts at ts and
// succeeds 2 s later.
func run(tenant, name string, ts int64) [2]apollo.Change {
	start := apollo.Task{TaskID: name + "#1", Name: name, Tenant: tenant, Status: apollo.StatusRunning, StartedAt: ts, UpdatedAt: ts}
	done := start
	done.Status, done.FinishedAt, done.CostMs, done.UpdatedAt = apollo.StatusSuccess, ts+2000, 2000, ts+2000
	return [2]apollo.Change{
		{Record: apollo.Record{Event: apollo.Event{TaskID: start.TaskID, Status: apollo.StatusRunning, Ts: ts}},
			Prev: apollo.Before{Name: name, Status: apollo.StatusPending}, Task: start},
		{Record: apollo.Record{Event: apollo.Event{TaskID: start.TaskID, Status: apollo.StatusSuccess, Ts: ts + 2000}},
			Prev: apollo.BeforeOf(&start), Task: done},
	}
}

func jobName(i int) string { return fmt.Sprintf("job_%03d_%05d", i%997, i) }

// fillRuns gives each of names jobs one run per minute over the
// minutes before now.
func fillRuns(a *metrics.Aggregator, now time.Time, names, minutes int) {
	for m := minutes; m > 0; m-- {
		for i := range names {
			rs := run("", jobName(i), now.UnixMilli()-int64(m)*60_000+int64(i%6)*10_000)
			a.Apply(&rs[0])
			a.Apply(&rs[1])
		}
	}
}

// BenchmarkApply: one change per op, from all cores. "late" writes 5
// minutes behind each job's newest bucket (30 buckets to update after it);
// the others write to the current bucket, the steady state. It runs on the
// system clock, as in production: a fake clock's Now takes a lock.
func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name     string
		names    int
		lag      time.Duration
		parallel bool
	}{
		{"names=1/serial", 1, 0, false},
		{"names=1/parallel", 1, 0, true},
		{"names=10000/parallel", 10000, 0, true},
		{"names=10000/late=5m/parallel", 10000, 5 * time.Minute, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := metrics.New(metrics.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			fillRuns(a, now, bc.names, 10)
			changes := make([][2]apollo.Change, bc.names)
			for i := range changes {
				changes[i] = run("", jobName(i), now.Add(-bc.lag).UnixMilli())
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			if !bc.parallel {
				for i := range b.N {
					a.Apply(&changes[0][i&1])
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(7919))
				for pb.Next() {
					i++
					a.Apply(&changes[(i>>1)%len(changes)][i&1])
				}
			})
		})
	}
}

// BenchmarkApplyNewRuns: one op is the first change (pending) of a new
// run of one of 100 jobs whose recent-runs rings are full, as in the
// replay of a log of new tasks: each run enters its job's ring and the
// oldest leaves it. Runs come in batches of 1 000 reported in the same
// millisecond, so the ring tells them apart by task ID. "newest": each
// run is the newest of its job; "interleaved": runs come shuffled within
// windows of 512, as when a Replayer's workers decide a log's tasks in
// parallel, so most go a few places before the end.
func BenchmarkApplyNewRuns(b *testing.B) {
	const jobs, window = 100, 512
	ids := make([]string, 1<<20) // far more than the rings keep: a wrapped ID is long gone
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%08d", i)
	}
	names := make([]string, jobs)
	for i := range names {
		names[i] = jobName(i)
	}
	shuffled := rand.New(rand.NewPCG(1, 2)).Perm(window)
	for _, order := range []string{"newest", "interleaved"} {
		b.Run("order="+order, func(b *testing.B) {
			a, err := metrics.New(metrics.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			ts := time.Now().UnixMilli()
			var c apollo.Change
			apply := func(i int) {
				if order == "interleaved" {
					i = i - i%window + shuffled[i%window]
				}
				name := names[i%jobs]
				c.Record = apollo.Record{Event: apollo.Event{TaskID: ids[i%len(ids)], Name: name, Status: apollo.StatusPending, Ts: ts + int64(i)/1000}}
				c.Task = apollo.Task{TaskID: c.Record.TaskID, Name: name, Status: apollo.StatusPending, UpdatedAt: c.Record.Ts}
				a.Apply(&c)
			}
			for i := range jobs * apollo.MaxRecentRuns {
				apply(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				apply(jobs*apollo.MaxRecentRuns + i)
			}
		})
	}
}

const tableNames = 100_000

// BenchmarkTable: a Table of 100 000 jobs, each with a run a minute over
// the last 10 minutes, for a few windows; and one evaluation cycle: a 5m
// Table plus Range and Sum for 10 000 prefix rules.
func BenchmarkTable(b *testing.B) {
	a, _ := benchAggregator(b)
	fillRuns(a, benchNow, tableNames, 10)
	ctx := context.Background()
	for _, w := range []time.Duration{time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour} {
		b.Run("window="+w.String(), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := a.Table(ctx, metrics.Query{Window: w, Now: benchNow}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/tableNames, "ns/name")
		})
	}
	prefixes := make([]string, 10_000)
	for i := range prefixes {
		prefixes[i] = jobName(i * 7)[:4+i%9]
	}
	b.Run("cycle=5m+10000rules", func(b *testing.B) {
		b.ReportAllocs()
		var sink int64
		for range b.N {
			tb, err := a.Table(ctx, metrics.Query{Window: 5 * time.Minute, Now: benchNow})
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range prefixes {
				sink += tb.Sum(tb.Range(p)).Failed
			}
		}
		_ = sink
	})
	tb, _ := a.Table(ctx, metrics.Query{Window: 5 * time.Minute, Now: benchNow})
	tb.Sum(0, 0) // prefix sums built
	b.Run("rule=Range+Sum", func(b *testing.B) {
		b.ReportAllocs()
		var sink int64
		for i := range b.N {
			sink += tb.Sum(tb.Range(prefixes[i%len(prefixes)])).Count
		}
		_ = sink
	})
}

// BenchmarkRolling: the last minute of one job whose history holds a few
// or a full hour of buckets; O(1) means the two cost the same.
func BenchmarkRolling(b *testing.B) {
	for _, minutes := range []int{1, 60} {
		b.Run("history="+strconv.Itoa(minutes)+"m", func(b *testing.B) {
			a, _ := benchAggregator(b)
			now := benchNow.UnixMilli()
			for k := int64(minutes) * 6; k > 0; k-- {
				rs := run("", "job", now-k*10_000)
				a.Apply(&rs[0])
				a.Apply(&rs[1])
			}
			b.ReportAllocs()
			b.ResetTimer()
			var sink int64
			for range b.N {
				sink += a.Rolling("", "job").Count
			}
			_ = sink
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory measures the heap per job (one bucket each) and per
// active bucket (jobs busy in every bucket of the bucket retention, with
// their rollups), next to the Stats.Bytes estimate.
func BenchmarkMemory(b *testing.B) {
	for _, bc := range []struct {
		name           string
		names, buckets int
		per            string
	}{
		{"sparse", 100_000, 1, "B/name"},
		{"dense", 1000, 360, "B/bucket"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var used, est float64
			for range b.N {
				before := heapInUse()
				a, _ := benchAggregator(b)
				now := benchNow.UnixMilli()
				for k := bc.buckets; k > 0; k-- {
					for i := range bc.names {
						rs := run("", jobName(i), now-int64(k-1)*10_000)
						a.Apply(&rs[1])
					}
				}
				after := heapInUse()
				st := a.Stats()
				units := float64(bc.names)
				if bc.per == "B/bucket" {
					units = float64(st.Buckets)
				}
				used += float64(after-before) / units
				est += float64(st.Bytes) / units
				runtime.KeepAlive(a)
			}
			b.ReportMetric(used/float64(b.N), bc.per)
			b.ReportMetric(est/float64(b.N), "est-"+bc.per)
		})
	}
}

// BenchmarkSnapshot writes and reads 10 000 jobs with 10 minutes of
// history each.
func BenchmarkSnapshot(b *testing.B) {
	a, _ := benchAggregator(b)
	fillRuns(a, benchNow, 10_000, 10)
	var buf bytes.Buffer
	if err := a.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.Run("write", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for range b.N {
			var w bytes.Buffer
			w.Grow(len(data))
			if err := a.WriteSnapshot(&w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		r, _ := benchAggregator(b)
		for range b.N {
			if err := r.ReadSnapshot(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
