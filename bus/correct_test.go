package bus

import (
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// jobRow returns the metrics of job name over the last hour.
func jobRow(t *testing.T, agg *metrics.Aggregator, name string) apollo.Summary {
	t.Helper()
	tb, err := agg.Table(t.Context(), metrics.Query{Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range tb.Names {
		if n == name {
			return tb.Rows[i]
		}
	}
	t.Fatalf("no metrics for job %q in %v", name, tb.Names)
	return apollo.Summary{}
}

// A correction changes the status and nothing the run reported: its start,
// finish and cost stay, and its metrics move from one status count to the
// other in the windows it was counted in (issue 15.2: a cost of 3 ms
// became 5.7 s, the finish moved by the time the operator took, and the
// job's MAX changed). Replaying the log after a crash gives the same.
func TestCorrectionKeepsTimesAndCost(t *testing.T) {
	t.Parallel()
	f, agg := newMetricsFixture(t)
	done := ev("c1", 2, apollo.StatusFailed)
	done.CostMs = 3
	other := ev("c2", 2, apollo.StatusSuccess)
	other.CostMs = 2
	f.publish(t, ev("c1", 1, apollo.StatusRunning), done, ev("c2", 1, apollo.StatusRunning), other,
		ev("c3", 1, apollo.StatusRunning))
	f.drain()
	before := f.get(t, "c1")
	if before.CostMs != 3 || before.FinishedAt != done.Ts {
		t.Fatalf("before the correction: %+v", before)
	}
	row := jobRow(t, agg, "job_c")
	if row.Count != 2 || row.Failed != 1 || row.Success != 1 || row.CostMax != 3 || row.CostMin != 2 || row.CostSum != 5 {
		t.Fatalf("metrics before the correction: %+v", row)
	}

	f.clock.Advance(5700 * time.Millisecond) // the operator takes a while
	fixed, err := f.bus.Correct(t.Context(), "", "c1", apollo.StatusSuccess, "ops", "checked by hand")
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Status != apollo.StatusSuccess || fixed.CostMs != 3 || fixed.StartedAt != before.StartedAt || fixed.FinishedAt != before.FinishedAt {
		t.Errorf("after the correction: %+v, want the times and cost of %+v", fixed, before)
	}
	// A correction that ends a running run: it finishes at the correction,
	// with no cost invented from the time the operator took.
	ended, err := f.bus.Correct(t.Context(), "", "c3", apollo.StatusFailed, "ops", "killed")
	if err != nil {
		t.Fatal(err)
	}
	if ended.FinishedAt != f.clock.Now().UnixMilli() || ended.CostMs != 0 || ended.StartedAt != ev("c3", 1, 0).Ts {
		t.Errorf("a running run ended by correction: %+v", ended)
	}
	f.drain()
	row = jobRow(t, agg, "job_c")
	if row.Count != 3 || row.Failed != 1 || row.Success != 2 || row.CostMax != 3 || row.CostMin != 2 || row.CostSum != 5 || row.CostN != 2 {
		t.Errorf("metrics after the corrections: %+v; want the run moved from failed to success, costs unchanged", row)
	}

	// The same after a restart: replay the log into a new bus.
	agg2 := newAggregator(t, f.clock)
	b2 := f.replayed(t, func(o *Options) { o.Observers = []Observer{agg2} })
	for _, id := range []string{"c1", "c3"} {
		want, got := f.get(t, id), mustGet(t, b2, id)
		if got.Status != want.Status || got.CostMs != want.CostMs || got.StartedAt != want.StartedAt || got.FinishedAt != want.FinishedAt {
			t.Errorf("%s after replay: %+v, want %+v", id, got, want)
		}
	}
	if got := jobRow(t, agg2, "job_c"); got != row {
		t.Errorf("metrics after replay %+v, want %+v", got, row)
	}
}
