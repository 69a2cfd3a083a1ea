package metrics

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"time"

	"github.com/apollo-11/apollo"
)

// A page of GET /api/v1/metrics is a few jobs and the total of every job
// of the tenant. Built from Table, it summarized every job and held a row
// for each (a million rows, about 130 MB, for a page of 100); the page's
// jobs are now found by binary search and summarized alone, and the total
// of the whole tenant is read from its sums: the tenant's buckets added
// up as Apply writes them. The sums are split in sumShards by job name so
// that Apply of different jobs seldom waits on one lock, and a total reads
// every shard: O(sumShards · log buckets), whatever the number of jobs.

// sumShards is how many sums a tenant keeps.
const sumShards = 8

var shardSeed = maphash.MakeSeed()

func shardOf(name string) int { return int(maphash.String(shardSeed, name) % sumShards) }

// addSum adds one change's parts of job name to its tenant's sums.
func (t *tenant) addSum(name string, parts []part, ref int) {
	sh := &t.sums[shardOf(name)]
	sh.mu.Lock()
	for i := range parts {
		if pt := &parts[i]; pt.ref == ref {
			sh.l0.add(pt.key, &pt.d, pt.cost)
			sh.l1.add(floorTo(pt.key, minuteMs), &pt.d, pt.cost)
		}
	}
	sh.mu.Unlock()
}

// foldSums drops the sums' buckets and rollups below the horizons.
func (t *tenant) foldSums(h0, h1 int64) {
	for i := range t.sums {
		sh := &t.sums[i]
		sh.mu.Lock()
		sh.l0.fold(h0)
		sh.l1.fold(h1)
		sh.mu.Unlock()
	}
}

// sumsOf builds the sums of ss (a tenant read from a snapshot): each
// bucket of each job added to its shard, in O(entries · log entries).
func sumsOf(ss []*series, sums *[sumShards]series) {
	type acc struct {
		d    vec
		cost costPair
	}
	var by [sumShards][2]map[int64]*acc
	for _, s := range ss {
		sh := shardOf(s.name)
		for lv := range 2 {
			l, out := s.level(lv), sums[sh].level(lv)
			out.base.add(&l.base)
			if by[sh][lv] == nil {
				by[sh][lv] = map[int64]*acc{}
			}
			m := by[sh][lv]
			for i, k := range l.keys {
				e := m[k]
				if e == nil {
					e = &acc{}
					m[k] = e
				}
				prev := l.cumAt(i)
				for f := range e.d {
					e.d[f] += l.cums[i][f] - prev[f]
				}
				if c := l.costs[i]; c.max > 0 {
					if e.cost.max == 0 {
						e.cost = c
					} else {
						e.cost = costPair{min(e.cost.min, c.min), max(e.cost.max, c.max)}
					}
				}
			}
		}
	}
	for sh := range sums {
		for lv := range 2 {
			m := by[sh][lv]
			if len(m) == 0 {
				continue
			}
			out := sums[sh].level(lv)
			keys := make([]int64, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			out.keys, out.cums, out.costs = keys, make([]vec, len(keys)), make([]costPair, len(keys))
			cum := out.base
			for i, k := range keys {
				cum.add(&m[k].d)
				out.cums[i], out.costs[i] = cum, m[k].cost
			}
		}
	}
}

// Page calls fn, in name order, for at most limit jobs of tenant whose
// names start with prefix and come after after, with each one's Summary
// over the window that ends at now (zero: the clock's now); more reports
// whether jobs under the prefix follow the last one. total is every job
// under the prefix: read from the tenant's sums for the whole tenant (an
// empty prefix), so that a page costs O(limit + log jobs) however many
// jobs the tenant has; a prefix's total adds up its jobs, O(jobs under
// it), without keeping a row for each.
func (a *Aggregator) Page(ctx context.Context, tenant, prefix, after string, limit int, window time.Duration, now time.Time,
	fn func(name string, s *apollo.Summary)) (total apollo.Summary, more bool, err error) {
	total.Window = window
	sp, err := a.span(window, 0, a.nowOr(now))
	if err != nil {
		return total, false, err // a bad window: the caller's field
	}
	t := a.tenant(tenant, false)
	if t == nil {
		return total, false, nil
	}
	b := sp.bounds(sp.start, sp.end)
	idx := t.index()
	lo, hi := prefixRange(idx.names, prefix)
	from := lo + sort.Search(hi-lo, func(i int) bool { return idx.names[lo+i] > after })
	to := min(hi, from+max(limit, 0))
	var s apollo.Summary
	for i := from; i < to; i++ {
		idx.series[i].summarizeLocked(&b, &s)
		s.Window = window
		fn(idx.names[i], &s)
	}
	if prefix == "" {
		for i := range t.sums {
			t.sums[i].summarizeLocked(&b, &s)
			total.Add(s)
		}
		return total, to < hi, nil
	}
	for i := lo; i < hi; i++ {
		if (i-lo)%tableChunk == 0 {
			if err := ctx.Err(); err != nil {
				return apollo.Summary{}, false, fmt.Errorf("metrics: page of tenant %q: %w", tenant, err)
			}
		}
		idx.series[i].summarizeLocked(&b, &s)
		total.Add(s)
	}
	return total, to < hi, nil
}

// summarizeLocked is summarize under the series' lock.
func (s *series) summarizeLocked(b *bounds, out *apollo.Summary) {
	s.mu.Lock()
	s.summarize(b, out)
	s.mu.Unlock()
}
