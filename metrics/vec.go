package metrics

import (
	"math"

	"github.com/apollo-11/apollo"
)

// The fields of vec, the counters and gauge deltas the aggregator keeps.
const (
	fCount = iota
	fSuccess
	fFailed
	fTimeout
	fStarted
	fLate
	fMissed
	fCostSum
	fCostN
	fBacklog
	fRunning
	fDueAgain // last: snapshots before version 3 end at fRunning
	nField
)

// vec holds one value per field. In a level's entries it holds cumulative
// sums, so that any window is the difference of two entries.
type vec [nField]int64

func (v *vec) add(d *vec) {
	for i := range v {
		v[i] += d[i]
	}
}

func (v *vec) isZero() bool { return *v == vec{} }

// diff sets v to the counters of e minus those of s and the gauges of e:
// gauges are levels, not sums over the window. A level below zero reads as
// zero: a task can leave pending in an earlier bucket than it entered when
// its pending and its next event came from clocks that disagree by more
// than MaxSkew (leftAt orders running exactly; pending has no start time
// to order by), and no job ever has -1 tasks waiting.
func (v *vec) diff(e, s *vec) {
	for i := range v {
		v[i] = e[i] - s[i]
	}
	v[fBacklog], v[fRunning] = max(e[fBacklog], 0), max(e[fRunning], 0)
}

func (v *vec) toSummary(s *apollo.Summary) {
	s.Count, s.Success, s.Failed, s.Timeout = v[fCount], v[fSuccess], v[fFailed], v[fTimeout]
	s.Started, s.Late, s.Missed = v[fStarted], v[fLate], v[fMissed]
	s.CostSum, s.CostN = costSum(v[fCostSum], v[fCostN]), v[fCostN]
	s.Backlog, s.Running = v[fBacklog], v[fRunning]
	s.DueAgain = v[fDueAgain]
}

// costSum reads the cost sum of a window or a total. Levels keep running
// sums, which wrap past int64, and a window is the difference of two: exact
// modulo 2^64. Costs are never negative (each is at most MaxCostMs), so a
// negative sum of runs that have costs went past MaxInt64, and reads as
// MaxInt64: an average too large rather than a negative one. The result is
// exact while the window's costs add up to less than 2^63 ms (over a
// million runs of the largest cost), and MaxInt64 up to twice that.
func costSum(sum, n int64) int64 {
	if n > 0 && sum < 0 {
		return math.MaxInt64
	}
	return sum
}

func (v *vec) fromSummary(s *apollo.Summary) {
	*v = vec{
		fCount: s.Count, fSuccess: s.Success, fFailed: s.Failed, fTimeout: s.Timeout,
		fStarted: s.Started, fLate: s.Late, fMissed: s.Missed,
		fCostSum: s.CostSum, fCostN: s.CostN,
		fBacklog: s.Backlog, fRunning: s.Running, fDueAgain: s.DueAgain,
	}
}

// costRange accumulates a minimum and maximum over positive costs.
type costRange struct{ lo, hi int64 }

func newCostRange() costRange { return costRange{lo: math.MaxInt64} }

func (r *costRange) fold(lo, hi int64) {
	if hi <= 0 { // no cost here
		return
	}
	r.lo, r.hi = min(r.lo, lo), max(r.hi, hi)
}

// put stores the range in s, or zeros when no cost was folded.
func (r costRange) put(s *apollo.Summary) {
	if r.hi <= 0 {
		s.CostMin, s.CostMax = 0, 0
		return
	}
	s.CostMin, s.CostMax = r.lo, r.hi
}
