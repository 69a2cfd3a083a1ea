package metrics

import (
	"sort"
	"strings"

	"github.com/apollo-11/apollo"
)

// prefixRange returns the names (sorted) that start with prefix: they are
// names[lo:hi].
func prefixRange(names []string, prefix string) (lo, hi int) {
	lo = sort.SearchStrings(names, prefix)
	// Names from lo on are >= prefix, and those with the prefix come first.
	hi = lo + sort.Search(len(names)-lo, func(i int) bool {
		return !strings.HasPrefix(names[lo+i], prefix)
	})
	return lo, hi
}

// JobsHealth calls fn for each job of the tenant whose name starts with
// prefix, in name order, until fn returns false. h is reused from call to
// call: copy what must outlive it. Each job costs a lock and O(1) unless
// its runs changed since it was last read, then O(RecentRuns log
// RecentRuns): a scrape or a page of 100 000 jobs reads only what
// changed.
func (a *Aggregator) JobsHealth(tenant, prefix string, fn func(h *apollo.JobHealth) bool) {
	t := a.tenant(tenant, false)
	if t == nil {
		return
	}
	idx := t.index()
	lo, hi := prefixRange(idx.names, prefix)
	var h apollo.JobHealth
	for _, s := range idx.series[lo:hi] {
		s.mu.Lock()
		s.readHealth(&h)
		s.mu.Unlock()
		if !fn(&h) {
			return
		}
	}
}

// readHealth fills h; s.mu must be held.
func (s *series) readHealth(h *apollo.JobHealth) {
	*h = apollo.JobHealth{Name: s.name}
	total := s.l0.cumAt(len(s.l0.keys))
	h.Success, h.Failed, h.Timeout = total[fSuccess], total[fFailed], total[fTimeout]
	h.CostSum, h.CostN = costSum(total[fCostSum], total[fCostN]), total[fCostN]
	h.Running = max(total[fRunning], 0)
	r := s.runs
	if r == nil {
		return
	}
	f := r.derive()
	h.Facts = f.JobFacts
	if f.last >= 0 {
		h.Last = r.ring[f.last]
	}
	h.Runs = len(r.ring)
	h.Durations = r.hist
	h.LastSuccessAt, h.LastFailedAt, h.LastTimeoutAt = r.lastEnd[0], r.lastEnd[1], r.lastEnd[2]
}

// RecentRuns appends the job's recent runs to dst, oldest first, and
// returns it; an unknown job has none.
func (a *Aggregator) RecentRuns(tenant, name string, dst []apollo.RecentRun) []apollo.RecentRun {
	s := a.lookup(tenant, name)
	if s == nil {
		return dst
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		return dst
	}
	return append(dst, s.runs.ring...)
}
