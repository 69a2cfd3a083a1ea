package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// fill gives each of n jobs a finished run every 30 s over the last
// 40 minutes, and returns the fixture flushed.
func fill(b *testing.B, n int) *fixture {
	b.Helper()
	f := newFixture(b, nil)
	now := f.clock.Now().UnixMilli()
	for i := range n {
		job := fmt.Sprintf("job-%05d", i)
		for k := range 80 {
			for _, c := range finishedRun("", job, now-int64(k)*30_000) {
				c.Task.TaskID = fmt.Sprintf("%s-%d", job, k)
				f.fl.Apply(&c)
			}
		}
	}
	f.flush(b)
	return f
}

// Table over a 5-minute and a 1-hour window for 1k and 10k jobs: the
// Redis store (two round trips, one HMGET per job) side by side with the
// Aggregator it copies.
func BenchmarkTable(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		f := fill(b, n)
		for _, w := range []time.Duration{5 * time.Minute, time.Hour} {
			for _, s := range []struct {
				name  string
				store metrics.Store
			}{{"redis", f.st}, {"aggregator", f.agg}} {
				b.Run(fmt.Sprintf("names=%d/window=%v/%s", n, w, s.name), func(b *testing.B) {
					b.ReportAllocs()
					q := metrics.Query{Window: w, Now: f.clock.Now()}
					for b.Loop() {
						tb, err := s.store.Table(context.Background(), q)
						if err != nil || len(tb.Names) != n {
							b.Fatalf("%d names, %v", len(tb.Names), err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/job")
				})
			}
		}
	}
}

// Apply through the flusher (the aggregator, and the dirty mark) side by
// side with the aggregator alone, on every core: what the flusher adds to
// the bus's hot path.
func BenchmarkApply(b *testing.B) {
	f := newFixture(b, nil)
	now := f.clock.Now().UnixMilli()
	var changes []apollo.Change
	for i := range 100 {
		changes = append(changes, finishedRun("", fmt.Sprintf("job-%03d", i), now-int64(i%6)*10_000)...)
	}
	for _, s := range []struct {
		name  string
		apply func(*apollo.Change)
	}{{"aggregator", f.agg.Apply}, {"flusher", f.fl.Apply}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := changes[next.Add(1)%int64(len(changes))]
					s.apply(&c)
				}
			})
		})
	}
}
