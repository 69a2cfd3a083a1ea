package audit

import (
	"cmp"
	"net"
	"slices"
	"strings"
	"time"
)

// otherSources is the Remote of the entry that counts the failures of
// sources past Options.FailureSources in one interval.
const otherSources = "other sources"

// failures aggregates the failures of unknown callers of the current
// interval, one entry per source.
type failures struct {
	interval   time.Duration
	maxSources int
	end        time.Time // when the current interval ends; zero: none open
	bySource   map[string]*Entry
}

func newFailures(o Options) failures {
	return failures{interval: o.FailureInterval, maxSources: o.FailureSources, bySource: map[string]*Entry{}}
}

// count adds one failure like e at now to its source's entry, and returns
// that entry and whether it is new (to be shown).
func (f *failures) count(e Entry, now time.Time) (*Entry, bool) {
	if f.end.IsZero() {
		f.end = now.Truncate(f.interval).Add(f.interval)
	}
	src := source(e.Remote)
	if agg := f.bySource[src]; agg != nil {
		agg.Count++
		agg.Last = now
		return agg, false
	}
	if len(f.bySource) >= f.maxSources {
		src = otherSources
		if agg := f.bySource[src]; agg != nil {
			agg.Count++
			agg.Last = now
			return agg, false
		}
	}
	e.At, e.Last, e.Count, e.Remote, e.Tenant = now, now, 1, src, ""
	e.capFields()
	f.bySource[src] = &e
	return &e, true
}

// ended returns the entries of the interval if it has ended by now, and
// starts afresh; otherwise nothing.
func (f *failures) ended(now time.Time) []*Entry {
	if f.end.IsZero() || now.Before(f.end) {
		return nil
	}
	return f.flush()
}

// flush returns the entries counted so far, oldest first, and starts
// afresh.
func (f *failures) flush() []*Entry {
	out := make([]*Entry, 0, len(f.bySource))
	for _, e := range f.bySource {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Entry) int { return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Remote, b.Remote)) })
	clear(f.bySource)
	f.end = time.Time{}
	return out
}

// source is the host of a client address: one caller on many connections
// is one source.
func source(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
