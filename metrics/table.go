package metrics

import (
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// Table is every job of a tenant with its Summary over one window, sorted
// by name. Range finds the jobs under a prefix in O(log n) and Sum totals a
// run of rows in O(1) (min and max in O(log n)), which is what evaluating
// thousands of prefix rules every 10 seconds needs.
//
// A Table is safe for concurrent readers. Names may be shared between
// tables of one store: do not modify it. Another Store builds one as
// &Table{Names: sorted, Rows: rows, Window: w}.
type Table struct {
	Names []string // sorted, unique
	// NamesID, when not 0, names the list Names is: two tables with the
	// same NamesID have the same Names. The Aggregator gives a tenant's
	// jobs a new ID whenever one comes or goes, so a reader may keep what
	// it worked out from the names (where a prefix's jobs are) until the
	// ID changes. 0, what other stores leave, says nothing.
	NamesID uint64
	Rows    []apollo.Summary // Rows[i] is Names[i]'s apollo.Summary
	Window  time.Duration

	once       sync.Once
	cum        []vec   // cum[i] sums Rows[:i]
	costs      []wide  // costs[i] sums Rows[:i].CostSum, which may pass int64
	mins, maxs []int64 // segment trees over the rows' CostMin and CostMax
}

// Range returns the rows of the jobs whose names start with prefix: they
// are Names[lo:hi]. An empty prefix is every job.
func (t *Table) Range(prefix string) (lo, hi int) { return prefixRange(t.Names, prefix) }

// Sum totals Rows[lo:hi]: counters and gauges are summed, CostMin and
// CostMax are taken over the rows that have costs.
func (t *Table) Sum(lo, hi int) apollo.Summary {
	t.once.Do(t.prepare)
	out := apollo.Summary{Window: t.Window}
	var v vec
	for i := range v {
		v[i] = t.cum[hi][i] - t.cum[lo][i]
	}
	v.toSummary(&out)
	out.CostSum = t.costs[hi].sub(t.costs[lo]).clamp()
	if out.CostN > 0 {
		r := costRange{
			lo: treeQuery(t.mins, lo, hi, math.MaxInt64, minInt),
			hi: treeQuery(t.maxs, lo, hi, 0, maxInt),
		}
		r.put(&out)
	}
	return out
}

func (t *Table) prepare() {
	n := len(t.Rows)
	t.cum = make([]vec, n+1)
	t.costs = make([]wide, n+1)
	t.mins = make([]int64, 2*n)
	t.maxs = make([]int64, 2*n)
	for i := range t.Rows {
		row := &t.Rows[i]
		var v vec
		v.fromSummary(row)
		t.cum[i+1] = t.cum[i]
		t.cum[i+1].add(&v)
		t.costs[i+1] = t.costs[i].add(row.CostSum)
		t.mins[n+i], t.maxs[n+i] = math.MaxInt64, 0
		if row.CostN > 0 {
			t.mins[n+i], t.maxs[n+i] = row.CostMin, row.CostMax
		}
	}
	for i := n - 1; i > 0; i-- {
		t.mins[i] = min(t.mins[2*i], t.mins[2*i+1])
		t.maxs[i] = max(t.maxs[2*i], t.maxs[2*i+1])
	}
}

// wide is a 128-bit two's complement integer, hi*2^64 + lo: the running
// sums of the rows' costs, each of which may be near MaxInt64 (saturated).
type wide struct {
	hi int64
	lo uint64
}

func (w wide) add(x int64) wide {
	lo, carry := bits.Add64(w.lo, uint64(x), 0)
	return wide{w.hi + x>>63 + int64(carry), lo} // x>>63 sign-extends x
}

func (w wide) sub(o wide) wide {
	lo, borrow := bits.Sub64(w.lo, o.lo, 0)
	return wide{w.hi - o.hi - int64(borrow), lo}
}

// clamp returns w saturated into int64.
func (w wide) clamp() int64 {
	switch {
	case w.hi > 0 || w.hi == 0 && w.lo > math.MaxInt64:
		return math.MaxInt64
	case w.hi < -1 || w.hi == -1 && w.lo <= math.MaxInt64:
		return math.MinInt64
	}
	return int64(w.lo)
}

func minInt(a, b int64) int64 { return min(a, b) }
func maxInt(a, b int64) int64 { return max(a, b) }

// treeQuery folds op over leaves [lo, hi) of a bottom-up segment tree.
func treeQuery(tree []int64, lo, hi int, acc int64, op func(a, b int64) int64) int64 {
	n := len(tree) / 2
	for lo, hi = lo+n, hi+n; lo < hi; lo, hi = lo>>1, hi>>1 {
		if lo&1 == 1 {
			acc = op(acc, tree[lo])
			lo++
		}
		if hi&1 == 1 {
			hi--
			acc = op(acc, tree[hi])
		}
	}
	return acc
}
