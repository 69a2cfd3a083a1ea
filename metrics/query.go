package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

// Store is what readers (the alert engine, the HTTP API) use. The
// Aggregator is the embedded Store; redisstore is the shared one. Both pass
// metricstest.Run.
type Store interface {
	// Table returns every job of q.Tenant with its Summary over one window.
	Table(ctx context.Context, q Query) (*Table, error)
	// Series returns window/step points, oldest first, each a Summary over
	// one step; the last step ends with the bucket that holds now.
	Series(ctx context.Context, tenant, name string, window, step time.Duration, now time.Time) ([]apollo.Point, error)
}

// Query selects one window: the buckets whose start is in
// (floor10(Now) - Offset - Window, floor10(Now) - Offset].
type Query struct {
	Tenant string
	// Window is 10s to 24h, a multiple of 10s.
	Window time.Duration
	// Offset moves the window into the past: 0 to 24h, a multiple of 10s.
	// pct_change compares a window with the one at Offset == Window.
	Offset time.Duration
	// Now is the time the window ends at; zero means the store's clock.
	Now time.Time
}

// MaxPoints bounds the length of a Series: a day of 10-second steps.
const MaxPoints = int(MaxWindow / BucketWidth)

func invalid(field, msg, hint string) error {
	return &apollo.Error{Code: apollo.EINVALID, Field: field, Message: msg, Hint: hint}
}

func checkWindow(w time.Duration) error {
	if w < BucketWidth || w > MaxWindow || w%BucketWidth != 0 {
		return invalid("window", fmt.Sprintf("%v is not a multiple of 10s between 10s and 24h", w), "use e.g. 1m, 5m or 1h")
	}
	return nil
}

func checkOffset(o time.Duration) error {
	if o < 0 || o > MaxWindow || o%BucketWidth != 0 {
		return invalid("offset", fmt.Sprintf("%v is not a multiple of 10s between 0 and 24h", o), "use the window's length to compare with the window before")
	}
	return nil
}

func checkStep(window, step time.Duration) error {
	if step < BucketWidth || step%BucketWidth != 0 || window%step != 0 {
		return invalid("step", fmt.Sprintf("%v is not a multiple of 10s that divides the window (%v)", step, window), "use e.g. 10s, 1m or 5m")
	}
	if int(window/step) > MaxPoints {
		return invalid("step", fmt.Sprintf("%v over %v makes more than %d points", step, window, MaxPoints), "use a longer step")
	}
	return nil
}

// span is one window resolved against the retention: which level answers
// each bound.
type span struct {
	start, end int64 // bucket starts in [start, end) are in the window, ms
	// Bounds at or after split are read from the 10-second buckets; older
	// ones from the rollups, rounded down to their minute, so that adjacent
	// windows neither overlap nor leave a gap.
	split int64
	// floor is where the rollups begin; an older bound reads as floor.
	floor int64
}

func (a *Aggregator) span(window, offset time.Duration, now time.Time) (span, error) {
	if err := checkWindow(window); err != nil {
		return span{}, err
	}
	if err := checkOffset(offset); err != nil {
		return span{}, err
	}
	ms := now.UnixMilli()
	end := floorTo(ms, bucketMs) + bucketMs - offset.Milliseconds()
	return span{
		start: end - window.Milliseconds(),
		end:   end,
		// A query for a moment before the last compaction must not read
		// below what that compaction kept.
		split: max(horizon(ms, a.br), a.compacted0.Load()),
		floor: max(horizon(ms, a.rr), a.compacted1.Load()),
	}, nil
}

// at resolves a bound to the level that answers it and the key there.
func (sp *span) at(x int64) (lv int, key int64) {
	if x >= sp.split {
		return 0, x
	}
	return 1, max(floorTo(x, minuteMs), sp.floor)
}

// bounds is [start, end) resolved against a span: the same for every job,
// so Table resolves it once.
type bounds struct {
	ls, le int   // levels of start and end
	ks, ke int64 // keys there
	split  int64
}

func (sp *span) bounds(start, end int64) bounds {
	b := bounds{split: sp.split}
	b.ls, b.ks = sp.at(start)
	b.le, b.ke = sp.at(end)
	return b
}

// summarize sets out to the series over b; s.mu must be held.
func (s *series) summarize(b *bounds, out *apollo.Summary) {
	lvS, lvE := s.level(b.ls), s.level(b.le)
	cs, is := lvS.before(b.ks)
	ce, ie := lvE.before(b.ke)
	var v vec
	v.diff(ce, cs)
	v.toSummary(out)
	r := newCostRange()
	if v[fCostN] > 0 {
		if b.ls == b.le {
			lvS.costRange(is, ie, &r)
		} else { // starts in the rollups, ends in the buckets
			s.l1.costRange(is, s.l1.search(b.split), &r)
			s.l0.costRange(s.l0.search(b.split), ie, &r)
		}
	}
	r.put(out)
}

func (a *Aggregator) nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return a.clock.Now()
	}
	return t
}

// tableChunk is how many jobs a Table worker takes at a time: big enough
// to make the shared counter cheap, small enough to share work evenly.
const tableChunk = 2048

// Table returns every job of q.Tenant, sorted by name, with its Summary over
// the window. An unknown tenant has an empty table. Large tenants are
// summarized on every core: reading 100 000 jobs is bound by memory
// latency, which more cores hide.
func (a *Aggregator) Table(ctx context.Context, q Query) (*Table, error) {
	ts, err := a.Tables(ctx, []Query{q})
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// Summaries calls fn, in name order, for each job of tenant whose name starts
// with prefix, with its Summary over the window that ends at now (zero:
// the clock's now), and returns their total: what GET /api/v1/metrics
// and the live stream read.
func (a *Aggregator) Summaries(ctx context.Context, tenant, prefix string, window time.Duration, now time.Time, fn func(name string, s *apollo.Summary)) (apollo.Summary, error) {
	return SummariesOf(ctx, a, tenant, prefix, window, now, fn)
}

// SummariesOf is Summaries over any Store, through its Table.
func SummariesOf(ctx context.Context, s Store, tenant, prefix string, window time.Duration, now time.Time, fn func(name string, s *apollo.Summary)) (apollo.Summary, error) {
	t, err := s.Table(ctx, Query{Tenant: tenant, Window: window, Now: now})
	if err != nil {
		return apollo.Summary{}, err
	}
	lo, hi := t.Range(prefix)
	for i := lo; i < hi; i++ {
		fn(t.Names[i], &t.Rows[i])
	}
	return t.Sum(lo, hi), nil
}

// Tables answers several queries of one tenant at one moment (the same
// Tenant and Now in each) in one pass over the jobs: each job's series is
// locked and brought into the cache once for all the windows, which is
// what an alert evaluation cycle with rules over 1m, 5m and 1h windows
// needs. Tables[i] answers qs[i], exactly as Table(qs[i]) would.
func (a *Aggregator) Tables(ctx context.Context, qs []Query) ([]*Table, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	q0 := qs[0]
	now := a.nowOr(q0.Now)
	bs := make([]bounds, len(qs))
	for i, q := range qs {
		if q.Tenant != q0.Tenant || !q.Now.Equal(q0.Now) {
			return nil, invalid("query", "Tables takes queries of one tenant at one moment", "call Table for each")
		}
		sp, err := a.span(q.Window, q.Offset, now)
		if err != nil {
			return nil, err
		}
		bs[i] = sp.bounds(sp.start, sp.end)
	}
	idx := emptyIndex
	if t := a.tenant(q0.Tenant, false); t != nil {
		idx = t.index()
	}
	ss := idx.series
	rows := make([][]apollo.Summary, len(qs))
	for i := range rows {
		rows[i] = make([]apollo.Summary, len(ss))
	}
	var next atomic.Int64
	work := func() error {
		for {
			lo := int(next.Add(tableChunk)) - tableChunk
			if lo >= len(ss) {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			for i := lo; i < min(lo+tableChunk, len(ss)); i++ {
				s := ss[i]
				s.mu.Lock()
				for k := range bs {
					s.summarize(&bs[k], &rows[k][i])
				}
				s.mu.Unlock()
				for k, q := range qs {
					rows[k][i].Window = q.Window
				}
			}
		}
	}
	workers := min(cmp.Or(a.tableWorkers, runtime.GOMAXPROCS(0)), (len(ss)+tableChunk-1)/tableChunk)
	errs := make([]error, max(workers, 1))
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { errs[w] = work() })
	}
	errs[0] = work()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metrics: table for tenant %q: %w", q0.Tenant, err)
	}
	ts := make([]*Table, len(qs))
	for k, q := range qs {
		ts[k] = &Table{Names: idx.names, NamesID: idx.id, Rows: rows[k], Window: q.Window}
	}
	return ts, nil
}

// Series returns the job's points over the window ending at now (zero: the
// clock's now). An unknown job has all-zero points.
func (a *Aggregator) Series(ctx context.Context, tenant, name string, window, step time.Duration, now time.Time) ([]apollo.Point, error) {
	sp, pts, err := a.seriesPoints(ctx, window, step, now)
	if err != nil {
		return nil, fmt.Errorf("metrics: series of %q: %w", name, err)
	}
	if s := a.lookup(tenant, name); s != nil {
		s.mu.Lock()
		s.walk(&sp, pts, false)
		s.mu.Unlock()
	}
	return pts, nil
}

// SeriesSum is Series summed over every job of the tenant whose name
// starts with prefix: the totals of a group of jobs, step by step. It
// reads each job once, in O(points + the job's entries in the window).
func (a *Aggregator) SeriesSum(ctx context.Context, tenant, prefix string, window, step time.Duration, now time.Time) ([]apollo.Point, error) {
	sp, pts, err := a.seriesPoints(ctx, window, step, now)
	if err != nil {
		return nil, fmt.Errorf("metrics: series of prefix %q: %w", prefix, err)
	}
	t := a.tenant(tenant, false)
	if t == nil {
		return pts, nil
	}
	idx := t.index()
	lo, hi := prefixRange(idx.names, prefix)
	for i, s := range idx.series[lo:hi] {
		if i%tableChunk == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("metrics: series of prefix %q: %w", prefix, err)
			}
		}
		s.mu.Lock()
		s.walk(&sp, pts, true)
		s.mu.Unlock()
	}
	return pts, nil
}

// seriesPoints checks a series' window and step and returns the span and
// the empty points, T and Window set.
func (a *Aggregator) seriesPoints(ctx context.Context, window, step time.Duration, now time.Time) (span, []apollo.Point, error) {
	sp, err := a.span(window, 0, a.nowOr(now))
	if err != nil {
		return span{}, nil, err
	}
	if err := checkStep(window, step); err != nil {
		return span{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return span{}, nil, err
	}
	pts := make([]apollo.Point, window/step)
	stepMs := step.Milliseconds()
	for i := range pts {
		pts[i].T = sp.start + int64(i)*stepMs
		pts[i].Window = step
	}
	return sp, pts, nil
}

// walk sets (or with add, adds to) each point the series' summary over
// the point's step; s.mu must be held. The steps' bounds ascend, so one
// cursor per level moves forward through the entries: the cost is the
// points plus the entries in the window, not a search per point. Each
// point is what summarize gives for its step.
func (s *series) walk(sp *span, pts []apollo.Point, add bool) {
	if len(pts) == 0 {
		return
	}
	stepMs := pts[0].Window.Milliseconds()
	var cur [2]int // per level: the first entry at or after the last key looked up
	for lv := range cur {
		cur[lv] = -1
	}
	// at returns the cumulative sums before bound x and the index there.
	at := func(x int64) (int, int, *vec) {
		lv, key := sp.at(x)
		l := s.level(lv)
		i := cur[lv]
		if i < 0 {
			i = l.search(key)
		}
		for i < len(l.keys) && l.keys[i] < key {
			i++
		}
		cur[lv] = i
		return lv, i, l.cumAt(i)
	}
	lvS, iS, cS := at(pts[0].T)
	for k := range pts {
		p := &pts[k]
		lvE, iE, cE := at(p.T + stepMs)
		var out apollo.Summary
		var v vec
		v.diff(cE, cS)
		v.toSummary(&out)
		r := newCostRange()
		if v[fCostN] > 0 {
			if lvS == lvE {
				s.level(lvS).costRange(iS, iE, &r)
			} else { // starts in the rollups, ends in the buckets
				s.l1.costRange(iS, s.l1.search(sp.split), &r)
				s.l0.costRange(s.l0.search(sp.split), iE, &r)
			}
		}
		r.put(&out)
		out.Window = p.Window
		if add {
			p.Summary.Add(out)
		} else {
			p.Summary = out
		}
		lvS, iS, cS = lvE, iE, cE
	}
}

// Rolling returns the job's last minute: the bucket that holds now and the
// five before it, the same as a 1m Table row. It reads only the newest few
// buckets, so it costs the same whatever the job's history.
func (a *Aggregator) Rolling(tenant, name string) apollo.Summary {
	out := apollo.Summary{Window: time.Minute}
	s := a.lookup(tenant, name)
	if s == nil {
		return out
	}
	sp, _ := a.span(time.Minute, 0, a.clock.Now()) // a valid window
	b := sp.bounds(sp.start, sp.end)
	s.mu.Lock()
	s.summarize(&b, &out)
	s.mu.Unlock()
	return out
}
