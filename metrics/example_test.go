package metrics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// The bus hands every applied change to Apply; the alert engine reads a
// Table per window and totals the jobs under each rule's prefix.
func ExampleAggregator() {
	clock := apollo.NewFakeClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	agg, err := metrics.New(metrics.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	now := clock.Now().UnixMilli()
	report := func(id, name string, status apollo.Status, ts int64) {
		prev := apollo.Task{TaskID: id, Name: name, Status: apollo.StatusRunning, StartedAt: ts - 4000}
		next := prev
		next.Status, next.FinishedAt, next.CostMs = status, ts, 4000
		agg.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id, Status: status, Ts: ts}}, Prev: apollo.BeforeOf(&prev), Task: next})
	}
	report("a1", "batch_import", apollo.StatusSuccess, now-90_000)
	report("a2", "batch_import", apollo.StatusFailed, now-30_000)
	report("b1", "batch_export", apollo.StatusSuccess, now-20_000)
	report("c1", "nightly_backup", apollo.StatusFailed, now-10_000)

	tb, err := agg.Table(context.Background(), metrics.Query{Window: 5 * time.Minute, Now: clock.Now()})
	if err != nil {
		panic(err)
	}
	for i, name := range tb.Names {
		fmt.Printf("%-15s finished %d failed %d\n", name, tb.Rows[i].Count, tb.Rows[i].Failed)
	}
	batch := tb.Sum(tb.Range("batch_"))
	fmt.Printf("batch_*: failed_rate %.2f, avg cost %.0f ms\n", batch.FailedRate(), batch.AvgCost())
	// Output:
	// batch_export    finished 1 failed 0
	// batch_import    finished 2 failed 1
	// nightly_backup  finished 1 failed 1
	// batch_*: failed_rate 0.33, avg cost 4000 ms
}
