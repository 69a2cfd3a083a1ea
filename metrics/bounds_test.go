package metrics_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// A cost that ingest now refuses but an older log may still hold (issue
// 16.1: costMs 5e18) must not break the snapshot: it was written, then
// refused on restart ("cost min ... out of order or range").
func TestSnapshotSurvivesHugeCosts(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	n := clock.Now().UnixMilli()
	for i, cost := range []int64{5e18, math.MaxInt64, 1 << 62} {
		for tn, name := range map[string]string{"": "huge", "team-b": "huge_b"} {
			c := change(tn, name, apollo.StatusRunning, apollo.StatusSuccess, n-int64(i)*1000)
			c.Task.CostMs = cost
			c.Prev.StartedAt = n - 5000
			a.Apply(c)
		}
	}
	b, _ := newIdle(t)
	if err := b.ReadSnapshot(bytes.NewReader(snapshot(t, a))); err != nil {
		t.Fatalf("the snapshot of a huge cost does not read back: %v", err)
	}
	sameAnswers(t, a, b, clock.Now())
	for tn, name := range map[string]string{"": "huge", "team-b": "huge_b"} {
		tb, err := b.Table(t.Context(), metrics.Query{Tenant: tn, Window: time.Minute})
		if err != nil || len(tb.Rows) != 1 {
			t.Fatalf("tenant %q: %v %+v", tn, err, tb)
		}
		if r := tb.Rows[0]; tb.Names[0] != name || r.CostMax != metrics.MaxCostMs || r.CostSum != 3*metrics.MaxCostMs || r.AvgCost() != metrics.MaxCostMs {
			t.Errorf("tenant %q: %s %+v, want three runs of %d", tn, tb.Names[0], r, int64(metrics.MaxCostMs))
		}
	}
}

// Cost sums that pass int64 saturate instead of wrapping to a negative
// sum and average when a Table totals rows (apollo.Summary.Add: its own
// test).
func TestCostSumsSaturate(t *testing.T) {
	t.Parallel()
	big := apollo.Summary{Count: 1, CostN: 1, CostSum: math.MaxInt64 - 10, CostMin: 5, CostMax: 5}
	tb := &metrics.Table{Names: []string{"a", "b", "c", "d"}, Window: time.Minute,
		Rows: []apollo.Summary{big, big, big, {Count: 1, CostN: 1, CostSum: 7, CostMin: 7, CostMax: 7}}}
	for _, r := range []struct {
		lo, hi int
		want   int64
	}{{0, 1, math.MaxInt64 - 10}, {0, 2, math.MaxInt64}, {0, 3, math.MaxInt64}, {0, 4, math.MaxInt64}, {2, 4, math.MaxInt64 - 3}, {3, 4, 7}, {1, 1, 0}} {
		if got := tb.Sum(r.lo, r.hi); got.CostSum != r.want {
			t.Errorf("Sum(%d, %d).CostSum = %d, want %d", r.lo, r.hi, got.CostSum, r.want)
		}
	}
}
