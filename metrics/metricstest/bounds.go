package metricstest

import (
	"math"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// hugeCosts: a cost past what ingest accepts (from a log written before it
// refused them) counts as MaxCostMs, so sums, averages and min/max stay
// positive and in range.
func (s *suite) hugeCosts(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("costs")
	m := newModel()
	var cs []apollo.Change
	for i, cost := range []int64{5e18, 1 << 62, math.MaxInt64} {
		r := newSim(tn, "job", string(rune('a'+i)))
		cs = append(cs, r.apply(step{status: running, ts: n - sec(50)}), r.apply(step{status: success, ts: n - sec(40), cost: cost}))
	}
	s.applyAll(t, m, cs)
	got := row(s.table(t, tn, time.Minute, 0, now), "job")
	if got.CostN != 3 || got.CostSum != 3*metrics.MaxCostMs || got.CostMin != metrics.MaxCostMs || got.CostMax != metrics.MaxCostMs ||
		got.AvgCost() != metrics.MaxCostMs {
		t.Errorf("three runs past the largest cost: %+v (average %v), want each counted as %d", got, got.AvgCost(), int64(metrics.MaxCostMs))
	}
	c := &checker{t: t, m: m, s: s}
	c.table(tn, now, time.Minute, 0, []string{"", "j"})
	c.series(tn, "job", now, 2*time.Minute, 10*time.Second)
}
