package metrics

import (
	"time"

	"github.com/apollo-11/apollo"
)

// This file is what a store outside the process (redisstore) needs from
// the Aggregator: which jobs a change touches and from which bucket on,
// each job's buckets as absolute values, and the window rules every Store
// resolves bounds by. The bus process keeps the Aggregator as the source of
// truth and copies the changed parts out; copying absolute values rather
// than deltas is what makes the copy idempotent.

// Entry is one bucket or rollup of a job: its own totals, not the running
// sums the Aggregator keeps.
type Entry struct {
	Start int64 // the bucket's start, Unix ms
	// Summary holds the bucket's own counters, cost sum and count, and the
	// min and max cost of the runs that finished in it. Its Backlog and
	// Running are the gauge moves made in the bucket (+1 and -1 summed),
	// not levels. Window is BucketWidth or RollupWidth.
	apollo.Summary
}

// Export is one job's state from some bucket on, as ExportJob fills it.
type Export struct {
	Buckets []Entry // 10-second buckets starting at or after bucketsFrom, oldest first
	Rollups []Entry // 1-minute rollups starting at or after rollupsFrom, oldest first
	// Backlog and Running are the levels after every move: the job's tasks
	// pending and running, moves in buckets ahead of the clock included.
	// The level at any bound is these minus the moves at or after it.
	Backlog, Running int64
}

// ExportJob fills out with the job's buckets starting at or after
// bucketsFrom and rollups starting at or after rollupsFrom (Unix ms),
// reusing out's slices, and reports whether the aggregator holds the job.
// The job is read under its lock, so the entries and levels are of one
// instant. Entries dropped by compaction are not returned.
func (a *Aggregator) ExportJob(tenant, name string, bucketsFrom, rollupsFrom int64, out *Export) bool {
	out.Buckets, out.Rollups = out.Buckets[:0], out.Rollups[:0]
	out.Backlog, out.Running = 0, 0
	s := a.lookup(tenant, name)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return false
	}
	out.Buckets = s.l0.export(bucketsFrom, BucketWidth, out.Buckets)
	out.Rollups = s.l1.export(rollupsFrom, RollupWidth, out.Rollups)
	// Every contribution goes to both levels, so either's total is the
	// level now; l0's is the one compaction folds least.
	total := s.l0.cumAt(len(s.l0.keys))
	out.Backlog, out.Running = total[fBacklog], total[fRunning]
	return true
}

// export appends the entries with keys at or after from.
func (l *level) export(from int64, width time.Duration, dst []Entry) []Entry {
	for i := l.search(from); i < len(l.keys); i++ {
		// Every field, the gauges too, as the entry's own: a difference
		// of running sums.
		own, before := l.cums[i], l.cumAt(i)
		for k := range own {
			own[k] -= before[k]
		}
		e := Entry{Start: l.keys[i], Summary: apollo.Summary{Window: width}}
		own.toSummary(&e.Summary)
		e.CostMin, e.CostMax = l.costs[i].min, l.costs[i].max
		dst = append(dst, e)
	}
	return dst
}

// Jobs calls fn for every job the aggregator holds, tenants in name order
// and each tenant's jobs in name order, until fn returns false. It visits
// every job: it is for full copies and sweeps, not for every flush.
func (a *Aggregator) Jobs(fn func(tenant, name string) bool) {
	names, ts := a.tenantList()
	for i, t := range ts {
		for _, s := range t.index().series {
			if !fn(names[i], s.name) {
				return
			}
		}
	}
}

// Touched calls fn for each job that applying c can change (one, or two
// when the change moves a task between jobs), with the start of the
// earliest bucket it can write to. Read now from the Aggregator's clock
// before calling Apply: the newest accepted timestamp is fixed by the
// record's receipt and the oldest only rises as time passes, so the bucket
// reported is never after one Apply writes.
// It may be earlier (a timestamp too old to count still reports its
// bucket); a store that copies from there copies a little more, never less.
func Touched(c *apollo.Change, now time.Time, fn func(tenant, name string, from int64)) {
	at := c.Record.Ts
	if c.Prev.Status.Final() {
		prev := c.PrevTask()
		at = min(at, finishedAt(&prev, c.Prev.UpdatedAt))
	}
	if c.Task.Status.Final() {
		at = min(at, finishedAt(&c.Task, c.Record.Ts))
	}
	// A gauge move beyond MaxSkew is clamped down to the newest accepted
	// time, or up to a horizon above it.
	from := floorTo(min(at, newestAccepted(c, now.UnixMilli())), bucketMs)
	// The plan's references are the jobs; its parts are not needed.
	p := planChange(c, now.UnixMilli(), int64(MaxWindow/time.Millisecond))
	for _, r := range p.refs[:p.nref] {
		fn(r.tenant, r.name, from)
	}
}

// Span is a window resolved against the retentions, by the rules in the
// package documentation: every Store resolves bounds this way, so that all
// give the same answers.
type Span struct {
	Start, End int64 // bucket starts in [Start, End) are in the window, Unix ms
	// Split is where the 10-second buckets begin: a bound at or after it is
	// exact, an older one is read from the rollups at its minute.
	Split int64
	// Floor is where the rollups begin: an older bound reads as Floor.
	Floor int64
}

// ResolveSpan checks a window and offset and resolves them at now for a
// store that keeps buckets bucketRetention and rollups rollupRetention.
// Errors are *apollo.Error on the field "window" or "offset".
func ResolveSpan(window, offset time.Duration, now time.Time, bucketRetention, rollupRetention time.Duration) (Span, error) {
	if err := checkWindow(window); err != nil {
		return Span{}, err
	}
	if err := checkOffset(offset); err != nil {
		return Span{}, err
	}
	ms := now.UnixMilli()
	end := floorTo(ms, bucketMs) + bucketMs - offset.Milliseconds()
	return Span{
		Start: end - window.Milliseconds(),
		End:   end,
		Split: horizon(ms, bucketRetention.Milliseconds()),
		Floor: horizon(ms, rollupRetention.Milliseconds()),
	}, nil
}

// At resolves a bound: level 0 (the 10-second buckets) at x itself, or
// level 1 (the rollups) at x rounded down to its minute and never below
// Floor.
func (sp Span) At(x int64) (level int, key int64) {
	s := span{split: sp.Split, floor: sp.Floor}
	return s.at(x)
}

// CheckStep checks a Series step against its window, as every Store must.
// Errors are *apollo.Error on the field "step".
func CheckStep(window, step time.Duration) error { return checkStep(window, step) }

// Horizon is the start of the oldest data a retention keeps at now: the
// bucket holding now and the retention/10s-1 before it, rounded down to a
// minute.
func Horizon(now time.Time, retention time.Duration) int64 {
	return horizon(now.UnixMilli(), retention.Milliseconds())
}
