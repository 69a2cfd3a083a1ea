package apollo_test

import (
	"math"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// Add sums counters and gauges and keeps the cost range of the sides that
// have costs.

func TestSummaryAdd(t *testing.T) {
	t.Parallel()
	a := apollo.Summary{Count: 1, CostN: 0, Backlog: 2}
	a.Add(apollo.Summary{Count: 2, CostN: 2, CostSum: 30, CostMin: 10, CostMax: 20, Running: 1, Window: time.Minute})
	a.Add(apollo.Summary{Count: 1, CostN: 1, CostSum: 5, CostMin: 5, CostMax: 5})
	a.Add(apollo.Summary{Count: 1}) // no costs: min and max stay
	want := apollo.Summary{Count: 5, CostN: 3, CostSum: 35, CostMin: 5, CostMax: 20, Backlog: 2, Running: 1, Window: time.Minute}
	if a != want {
		t.Errorf("Add: %+v, want %+v", a, want)
	}
}

// A cost sum that passes int64 saturates instead of wrapping to a
// negative sum and average.
func TestSummaryAddSaturates(t *testing.T) {
	t.Parallel()
	big := apollo.Summary{Count: 1, CostN: 1, CostSum: math.MaxInt64 - 10, CostMin: 5, CostMax: 5}
	s := big
	s.Add(big)
	if s.CostSum != math.MaxInt64 || s.CostN != 2 || s.AvgCost() <= 0 {
		t.Errorf("Add past int64: %+v, want CostSum saturated at MaxInt64", s)
	}
	s.Add(big)
	if s.CostSum != math.MaxInt64 {
		t.Errorf("Add to a saturated sum: %+v", s)
	}
}
