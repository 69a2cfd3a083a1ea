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
// interval, one entry per action and source.
type failures struct {
	interval   time.Duration
	maxSources int
	end        time.Time // when the current interval ends; zero: none open
	bySource   map[failureKey]*Entry
}

type failureKey struct{ action, source string }

func newFailures(o Options) failures {
	return failures{interval: o.FailureInterval, maxSources: o.FailureSources, bySource: map[failureKey]*Entry{}}
}

// count adds one failure like e at now to the entry of its action and
// source, and returns that entry and whether it is new (to be shown).
func (f *failures) count(e Entry, now time.Time) (*Entry, bool) {
	if f.end.IsZero() {
		f.end = now.Truncate(f.interval).Add(f.interval)
	}
	e.capFields() // the action is part of the key: cut before it is one
	key := failureKey{e.Action, source(e.Remote)}
	agg := f.bySource[key]
	if agg == nil && len(f.bySource) >= f.maxSources {
		key.source = otherSources
		agg = f.bySource[key]
	}
	if agg != nil {
		agg.Count++
		agg.Last = now
		return agg, false
	}
	e.At, e.Last, e.Count, e.Remote, e.Tenant = now, now, 1, key.source, ""
	f.bySource[key] = &e
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
