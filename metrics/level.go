package metrics

// A level is one job's history at one resolution (10-second buckets or
// 1-minute rollups), stored sparsely: one entry per bucket that saw
// something, sorted by key. Entries hold cumulative sums since the job was
// first seen, so the total over any run of buckets is the difference of two
// entries, found by binary search; base holds the sums of entries that
// compaction dropped, so the gauges (which are cumulative sums of +1/-1)
// survive it.
type level struct {
	base    vec
	entries []entry
}

type entry struct {
	key int64 // bucket start, Unix ms
	cum vec   // sums over every bucket up to and including this one
	// min and max cost of the runs that finished in this bucket alone; both
	// 0 when none with a cost remains.
	min, max int64
}

// tailScan is how many of the newest entries search walks before it uses
// binary search. Writes and the ends of recent windows land on the newest
// buckets: events are at most MaxSkew (6 buckets) ahead of now, and the
// rolling minute is 6 buckets, so the walk answers them in O(1).
const tailScan = 16

// search returns the index of the first entry whose key is >= key.
func (l *level) search(key int64) int {
	e := l.entries
	n := len(e)
	if n <= tailScan || e[n-tailScan].key < key {
		i := n
		for i > 0 && e[i-1].key >= key {
			i--
		}
		return i
	}
	lo, hi := 0, n-tailScan
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e[m].key < key {
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
	return &l.entries[i-1].cum
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
	inserted := i == len(l.entries) || l.entries[i].key != key
	if inserted {
		l.entries = append(l.entries, entry{})
		copy(l.entries[i+1:], l.entries[i:])
		l.entries[i] = entry{key: key, cum: *l.cumAt(i)}
	}
	for j := i; j < len(l.entries); j++ {
		l.entries[j].cum.add(d)
	}
	e := &l.entries[i]
	switch own := e.cum[fCostN] - l.cumAt(i)[fCostN]; {
	case own <= 0:
		// Every cost here was taken out again: forget the range rather
		// than keep bounds of runs that no longer count.
		e.min, e.max = 0, 0
	case cost <= 0:
	case e.max == 0:
		e.min, e.max = cost, cost
	default:
		e.min, e.max = min(e.min, cost), max(e.max, cost)
	}
	return inserted
}

// fold drops the entries with keys below horizon into base and reports how
// many it dropped.
func (l *level) fold(horizon int64) int {
	n := 0
	for n < len(l.entries) && l.entries[n].key < horizon {
		n++
	}
	if n == 0 {
		return 0
	}
	l.base = l.entries[n-1].cum
	l.entries = l.entries[n:]
	// Slicing off the front leaves the dropped entries in the array until
	// append moves it; copy into a smaller one when most of it is dead.
	if c := cap(l.entries); c > 16 && c > 4*len(l.entries) {
		l.entries = append(make([]entry, 0, 2*len(l.entries)), l.entries...)
	}
	return n
}

// costRange folds the min and max of entries[i:j] into r.
func (l *level) costRange(i, j int, r *costRange) {
	for k := i; k < j; k++ {
		e := &l.entries[k]
		r.fold(e.min, e.max)
	}
}
