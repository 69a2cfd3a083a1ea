package metrics

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
)

// Fixed resolutions and limits.
const (
	BucketWidth = 10 * time.Second // the resolution of every window
	RollupWidth = time.Minute      // the resolution of data older than BucketRetention
	MaxSkew     = time.Minute      // how far ahead of its receipt an event may be
	MaxWindow   = 24 * time.Hour   // the longest window, and the longest offset
)

// Defaults of Options.
const (
	DefaultBucketRetention = time.Hour
	DefaultRollupRetention = 24 * time.Hour
	DefaultCompactEvery    = time.Minute
)

// Options configure an Aggregator. The zero value is usable.
type Options struct {
	Clock apollo.Clock // default apollo.SystemClock
	// BucketRetention is how long 10-second buckets are kept: a multiple of
	// 10s, at least 1m. Older parts of a window come from the rollups.
	BucketRetention time.Duration
	// RollupRetention is how long 1-minute rollups are kept: a multiple of
	// 1m, at least BucketRetention. Events older than that are not counted.
	RollupRetention time.Duration
	// CompactEvery is how often expired data is dropped: at least 1s.
	CompactEvery time.Duration
	// RecentRuns is how many runs each job remembers for its health
	// (runs.go): 1 to apollo.MaxRecentRuns, default apollo.DefaultRecentRuns.
	RecentRuns int
	Logger     *slog.Logger // default slog.Default()
}

func (o *Options) setDefaults() {
	if o.Clock == nil {
		o.Clock = apollo.SystemClock
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.BucketRetention = cmp.Or(o.BucketRetention, DefaultBucketRetention)
	o.RollupRetention = cmp.Or(o.RollupRetention, DefaultRollupRetention)
	o.CompactEvery = cmp.Or(o.CompactEvery, DefaultCompactEvery)
	o.RecentRuns = cmp.Or(o.RecentRuns, apollo.DefaultRecentRuns)
}

func (o *Options) validate() error {
	bad := func(field, msg, hint string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: "metrics." + field, Message: msg, Hint: hint}
	}
	switch {
	case o.BucketRetention < time.Minute || o.BucketRetention%BucketWidth != 0:
		return bad("BucketRetention", fmt.Sprintf("%v is not a multiple of 10s of at least 1m", o.BucketRetention), "leave it unset for 1h")
	case o.RollupRetention < o.BucketRetention || o.RollupRetention%RollupWidth != 0:
		return bad("RollupRetention", fmt.Sprintf("%v is not a whole number of minutes of at least BucketRetention (%v)", o.RollupRetention, o.BucketRetention), "leave it unset for 24h")
	case o.CompactEvery < time.Second:
		return bad("CompactEvery", fmt.Sprintf("%v is below 1s", o.CompactEvery), "leave it unset for 1m")
	case o.RecentRuns < 1 || o.RecentRuns > apollo.MaxRecentRuns:
		return bad("RecentRuns", fmt.Sprintf("%d is not from 1 to %d", o.RecentRuns, apollo.MaxRecentRuns), fmt.Sprintf("leave it unset for %d", apollo.DefaultRecentRuns))
	}
	return nil
}

// Aggregator is the in-memory Store: it counts Changes into per-job buckets
// and answers windows over them. Apply may be called from many goroutines.
type Aggregator struct {
	clock  apollo.Clock
	log    *slog.Logger
	br, rr int64 // retentions, ms
	every  time.Duration
	recent int // Options.RecentRuns

	registry

	// compacted0 and compacted1 are the horizons of the last compaction:
	// below them the levels hold only their base sums.
	compacted0, compacted1 atomic.Int64
	tooOld, tooNew         atomic.Int64

	// compacted, set by tests, receives the time of each compaction.
	compacted chan time.Time
	// tableWorkers, set by benchmarks, caps Table's goroutines; 0 means
	// GOMAXPROCS.
	tableWorkers int

	life lifecycle.Group // compaction
}

var _ Store = (*Aggregator)(nil)

// New returns an Aggregator. Call Start to run compaction.
func New(opts Options) (*Aggregator, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Aggregator{
		clock:  opts.Clock,
		log:    opts.Logger,
		br:     opts.BucketRetention.Milliseconds(),
		rr:     opts.RollupRetention.Milliseconds(),
		every:  opts.CompactEvery,
		recent: opts.RecentRuns,
		life:   lifecycle.Group{Name: "metrics", Restart: true},
	}, nil
}

// Start runs compaction every CompactEvery on the clock until Stop. It
// returns at once.
func (a *Aggregator) Start(ctx context.Context) error {
	return a.life.Start(ctx, func(context.Context) error {
		tick := a.clock.NewTicker(a.every)
		a.life.Go(func(ctx context.Context) error { a.loop(ctx, tick); return nil })
		return nil
	})
}

// Stop ends compaction and waits for it, or for ctx. It may be called any
// number of times, also without Start.
func (a *Aggregator) Stop(ctx context.Context) error { return a.life.Stop(ctx, nil) }

func (a *Aggregator) loop(ctx context.Context, tick apollo.Ticker) {
	defer tick.Stop()
	var seenOld, seenNew int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			// The clock, not the tick: a fake clock that jumps hours
			// delivers only its first, stale tick.
			now := a.clock.Now()
			a.compact(now)
			if a.compacted != nil {
				select {
				case a.compacted <- now:
				case <-ctx.Done():
					return
				}
			}
			// Dropped events are counted in Stats; say so in the log at
			// most once per compaction, not once per event.
			old, nw := a.tooOld.Load(), a.tooNew.Load()
			if old != seenOld || nw != seenNew {
				a.log.Warn("metrics: events outside the accepted time range were not counted",
					"tooOld", old-seenOld, "tooNew", nw-seenNew,
					"rollupRetention", time.Duration(a.rr)*time.Millisecond, "maxSkew", MaxSkew)
				seenOld, seenNew = old, nw
			}
		}
	}
}

// Apply counts one change. Changes of one task must come in order; changes
// of different tasks may come concurrently and in any order.
func (a *Aggregator) Apply(c *apollo.Change) {
	p := planChange(c, a.clock.Now().UnixMilli(), a.rr)
	if p.tooOld {
		a.tooOld.Add(1)
	}
	if p.tooNew {
		a.tooNew.Add(1)
	}
	// The task's job (ref 0) takes the run into its recent runs, and the
	// job it left, if any, lets it go. A record with a time out of range
	// does not make a job for its run alone. Whether a job is made
	// depends on the change alone, never on what came before, or the
	// rings would depend on the order of the tasks.
	for r := range p.nref {
		var s *series
		if p.writes(r) || r == 0 && p.inRange(c.Record.Ts) {
			s = a.lockSeries(p.refs[r])
		} else if s = a.lookup(p.refs[r].tenant, p.refs[r].name); s != nil {
			s.mu.Lock()
			if s.dead {
				s.mu.Unlock()
				continue
			}
		} else {
			continue
		}
		for i := range p.parts[:p.n] {
			if pt := &p.parts[i]; pt.ref == r {
				s.l0.add(pt.key, &pt.d, pt.cost)
				s.l1.add(floorTo(pt.key, minuteMs), &pt.d, pt.cost)
			}
		}
		runs := s.health()
		for i := range p.finishes[:p.nfin] {
			if f := &p.finishes[i]; f.ref == r {
				runs.finish(f)
			}
		}
		if r == 0 {
			runs.put(c, a.recent)
		} else {
			runs.drop(c.Task.TaskID)
		}
		s.mu.Unlock()
	}
}

// Stats are counters about the aggregator itself.
type Stats struct {
	Names   int64 // jobs tracked, over all tenants
	Buckets int64 // 10-second buckets held
	Rollups int64 // 1-minute rollups held
	TooOld  int64 // changes with a timestamp older than the rollup retention
	TooNew  int64 // changes with a timestamp more than MaxSkew after their receipt
	Bytes   int64 // estimated memory held
}

// seriesBytes is a rough size of a series with its map and index slots,
// for Stats.Bytes.
const seriesBytes = int64(unsafe.Sizeof(series{})) + 16 + 64 + 8 + 16

// Stats counts what the aggregator holds. It visits every job: call it
// for monitoring, not on a hot path.
func (a *Aggregator) Stats() Stats {
	st := Stats{TooOld: a.tooOld.Load(), TooNew: a.tooNew.Load()}
	_, ts := a.tenantList()
	for _, t := range ts {
		for _, s := range t.index().series {
			s.mu.Lock()
			st.Names++
			st.Buckets += int64(len(s.l0.keys))
			st.Rollups += int64(len(s.l1.keys))
			st.Bytes += seriesBytes + int64(len(s.name)) + s.l0.bytes() + s.l1.bytes()
			if s.runs != nil {
				st.Bytes += s.runs.bytes()
			}
			s.mu.Unlock()
		}
	}
	return st
}

// compact drops buckets and rollups that have left their retention, and
// jobs left with nothing: no data and nothing pending or running.
func (a *Aggregator) compact(now time.Time) {
	ms := now.UnixMilli()
	h0, h1 := horizon(ms, a.br), horizon(ms, a.rr)
	// Publish the horizons first: a query then stops reading a level
	// below its horizon before the data there goes.
	storeMax(&a.compacted0, h0)
	storeMax(&a.compacted1, h1)
	var dropped0, dropped1, removed int
	_, ts := a.tenantList()
	for _, t := range ts {
		var empty []*series
		for _, s := range t.index().series {
			s.mu.Lock()
			dropped0 += s.l0.fold(h0)
			dropped1 += s.l1.fold(h1)
			if s.idle() {
				empty = append(empty, s)
			}
			s.mu.Unlock()
		}
		removed += t.remove(empty)
	}
	a.log.Debug("metrics: compacted", "buckets", dropped0, "rollups", dropped1, "names", removed)
}

func storeMax(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}
