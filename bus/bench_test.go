package bus

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/apollo-11/apollo"
)

// BenchmarkPublish measures decided events per second through Publish with
// no log (the log's cost is measured in package wal), in batches of 100 as
// the HTTP API hands them over, from parallel callers.
func BenchmarkPublish(b *testing.B) {
	bus, _ := New(Options{})
	bus.Start(context.Background())
	defer bus.Stop()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		evs := make([]apollo.Event, 0, 100)
		out := make([]Outcome, 100)
		flush := func() {
			bus.Publish(context.Background(), evs, out)
			evs = evs[:0]
		}
		for pb.Next() {
			i := next.Add(1)
			id := fmt.Sprintf("task-%d", i/3)
			evs = append(evs, apollo.Event{TaskID: id, Name: "job", Sequence: i%3 + 1,
				Status: [3]apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess}[i%3], Ts: 1e12 + i})
			if len(evs) == cap(evs) {
				flush()
			}
		}
		flush()
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMemoryPerTask measures the heap held per tracked task: a task
// that reported pending, running and success (the typical run), with its
// history, in memory.
func BenchmarkMemoryPerTask(b *testing.B) {
	const n = 100_000
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
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/task")
		runtime.KeepAlive(bus)
		bus.Stop()
		b.StartTimer()
	}
}
