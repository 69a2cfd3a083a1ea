package metrics

import "slices"

// A level is one job's history at one resolution (10-second buckets or
// 1-minute rollups), stored sparsely: one entry per bucket that saw
// something, sorted by key. Entries hold cumulative sums since the job was
// first seen, so the total over any run of buckets is the difference of two
// entries, found by binary search; base holds the sums of entries that
// compaction dropped, so the gauges (which are cumulative sums of +1/-1)
// survive it.
//
// The entries are kept as parallel slices rather than one slice of
// structs: a search then reads keys from one or two cache lines instead of
// one line per entry, which is most of what Table costs for 100 000 jobs.
type level struct {
	// The slice headers come first: with the series' lock they fill the
	// first cache lines of a series, which every read touches.
	keys  []int64    // bucket starts, Unix ms, ascending
	cums  []vec      // cums[i]: sums over every bucket up to keys[i]
	costs []costPair // costs[i]: min and max cost of bucket keys[i] alone
	base  vec
}

// costPair is the min and max cost of the runs that finished in one
// bucket; both 0 when none with a cost remains.
type costPair struct{ min, max int64 }

// tailScan is how many of the newest entries search walks before it uses
// binary search. Writes and the ends of recent windows land on the newest
// buckets: events are at most MaxSkew (6 buckets) ahead of now, and the
// rolling minute is 6 buckets, so the walk answers them in O(1).
const tailScan = 16

// search returns the index of the first entry whose key is >= key.
func (l *level) search(key int64) int {
	k := l.keys
	n := len(k)
	if n <= tailScan || k[n-tailScan] < key {
		i := n
		for i > 0 && k[i-1] >= key {
			i--
		}
		return i
	}
	lo, hi := 0, n-tailScan
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if k[m] < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// cumAt returns the sums over every bucket before index i.
func (l *level) cumAt(i int) *vec {
	if i == 0 {
		return &l.base
	}
	return &l.cums[i-1]
}

// before returns the sums over every bucket with a key below key, and the
// index of the first entry at or after it.
func (l *level) before(key int64) (*vec, int) {
	i := l.search(key)
	return l.cumAt(i), i
}

// add adds d to the bucket at key and to the cumulative sums after it, and
// folds cost (when > 0) into the bucket's min and max. It reports whether
// a new entry was made. Adding to the newest bucket, the common case, costs
// O(1); an out-of-order write pays for the entries after it.
func (l *level) add(key int64, d *vec, cost int64) bool {
	i := l.search(key)
	inserted := i == len(l.keys) || l.keys[i] != key
	if inserted {
		l.keys = slices.Insert(l.keys, i, key)
		l.cums = slices.Insert(l.cums, i, *l.cumAt(i))
		l.costs = slices.Insert(l.costs, i, costPair{})
	}
	for j := i; j < len(l.cums); j++ {
		l.cums[j].add(d)
	}
	c := &l.costs[i]
	switch own := l.cums[i][fCostN] - l.cumAt(i)[fCostN]; {
	case own <= 0:
		// Every cost here was taken out again: forget the range rather
		// than keep bounds of runs that no longer count.
		*c = costPair{}
	case cost <= 0:
	case c.max == 0:
		*c = costPair{cost, cost}
	default:
		c.min, c.max = min(c.min, cost), max(c.max, cost)
	}
	return inserted
}

// fold drops the entries with keys below horizon into base and reports how
// many it dropped.
func (l *level) fold(horizon int64) int {
	n := 0
	for n < len(l.keys) && l.keys[n] < horizon {
		n++
	}
	if n == 0 {
		return 0
	}
	l.base = l.cums[n-1]
	l.keys, l.cums, l.costs = l.keys[n:], l.cums[n:], l.costs[n:]
	// Slicing off the front leaves the dropped entries in the arrays until
	// append moves them; copy into smaller ones when most is dead.
	if c := cap(l.keys); c > 16 && c > 4*len(l.keys) {
		l.keys = shrink(l.keys)
		l.cums = shrink(l.cums)
		l.costs = shrink(l.costs)
	}
	return n
}

func shrink[T any](s []T) []T { return append(make([]T, 0, 2*len(s)), s...) }

// costRange folds the min and max of entries [i, j) into r.
func (l *level) costRange(i, j int, r *costRange) {
	for _, c := range l.costs[i:j] {
		r.fold(c.min, c.max)
	}
}

// bytes estimates the memory the level holds.
func (l *level) bytes() int64 {
	return int64(cap(l.keys))*8 + int64(cap(l.cums))*nField*8 + int64(cap(l.costs))*16
}
