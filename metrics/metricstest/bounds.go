package metricstest

import (
	"math"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// skewedClocks: a run reported running (or pending) by a clock more than
// MaxSkew ahead and finished by one that is right leaves the gauges where
// they were, never below (running read -1 until the fast clock's time
// came). Running stays exact: the steady run is still counted.
func (s *suite) skewedClocks(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("clocks")
	m := newModel()
	ahead, steady, queued := newSim(tn, "job", "ahead"), newSim(tn, "job", "steady"), newSim(tn, "job", "queued")
	s.applyAll(t, m, []apollo.Change{
		steady.apply(step{status: running, ts: n - sec(30)}),
		ahead.apply(step{status: running, ts: n + sec(120)}),  // a clock 2 min fast
		ahead.apply(step{status: success, ts: n}),             // its end, by a clock that is right
		queued.apply(step{status: pending, ts: n + sec(120)}), // queued by the fast clock,
		queued.apply(step{status: failed, ts: n}),             // given up by the right one
	})
	c := &checker{t: t, m: m, s: s}
	for _, later := range []time.Duration{0, 30 * time.Second, 90 * time.Second, 3 * time.Minute} {
		at := now.Add(later)
		s.h.Clock.Set(at)
		if got := row(s.table(t, tn, time.Minute, 0, at), "job"); got.Running != 1 || got.Backlog != 0 {
			t.Errorf("%v later: running %d, backlog %d, want 1 (the steady run only) and 0", later, got.Running, got.Backlog)
		}
		c.table(tn, at, time.Minute, 0, nil)
		c.series(tn, "job", at, 5*time.Minute, 10*time.Second)
	}
}

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
