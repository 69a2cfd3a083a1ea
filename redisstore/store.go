package redisstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// readMargin widens the fields read past now+MaxSkew, for writers whose
// clock runs ahead of the reader's: their gauge moves up there must be
// read to take them off the levels.
const readMargin = time.Minute

// readChunk bounds the jobs one pipeline asks for, so that a large Table
// does not hold every reply at once.
const readChunk = 1000

// Store reads the metrics flushers wrote, for the alert engine and the API
// of processes that do not hold the aggregator. It answers exactly as the
// Aggregator would (metricstest.Run proves it), summing every writer.
type Store struct {
	c       redis.UniversalClient
	keys    keyspace
	clock   apollo.Clock
	br, rr  time.Duration
	require bool // Options.RequireWriters
}

var _ metrics.Store = (*Store)(nil)

// NewStore returns a Store. Of opts it reads Client, Prefix, the
// retentions (the writers') and Clock.
func NewStore(opts Options) (*Store, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Store{c: opts.Client, keys: keyspace{opts.Prefix}, clock: opts.Clock,
		br: opts.BucketRetention, rr: opts.RollupRetention, require: opts.RequireWriters}, nil
}

// checkWriters refuses to read with no writer announced, when the Store
// requires one (Options.RequireWriters).
func (s *Store) checkWriters(writers []string) error {
	if !s.require || len(writers) > 0 {
		return nil
	}
	return &apollo.Error{Code: apollo.EUNAVAILABLE, Field: s.keys.writers(),
		Message: "no bus has written metrics to Redis under this prefix: none has started yet, or Redis lost its data and the bus has not copied it again",
		Hint:    "start apollo bus with the same redis.url and redis.prefix; a running bus copies everything again within a second of Redis coming back"}
}

// Table returns every job of q.Tenant with its Summary over the window.
// It costs two round trips: the names and writers, then one HMGET per job
// for the window's fields (see docs/redis.md for how that grows).
func (s *Store) Table(ctx context.Context, q metrics.Query) (*metrics.Table, error) {
	now := s.clock.Now()
	if q.Now.IsZero() {
		q.Now = now
	}
	sp, err := s.span(q.Window, q.Offset, q.Now, now)
	if err != nil {
		return nil, err
	}
	pipe := s.c.Pipeline()
	namesCmd := pipe.ZRange(ctx, s.keys.names(q.Tenant), 0, -1)
	writersCmd := pipe.ZRange(ctx, s.keys.writers(), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redisstore: table for tenant %q: names: %w", q.Tenant, err)
	}
	if err := s.checkWriters(writersCmd.Val()); err != nil {
		return nil, err
	}
	names := namesCmd.Val()
	slices.Sort(names)
	p := newReadPlan(sp, []int64{sp.Start, sp.End}, maxTime(q.Now, now), writersCmd.Val())
	rows := make([]apollo.Summary, len(names))
	err = s.read(ctx, q.Tenant, names, &p, func(i int, d *jobData) {
		d.summarize(&p, sp.Start, sp.End, &rows[i])
		rows[i].Window = q.Window
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: table for tenant %q: %w", q.Tenant, err)
	}
	return &metrics.Table{Names: names, Rows: rows, Window: q.Window}, nil
}

// Summaries is metrics.SummariesOf over this store: a prefix's jobs with their
// Summaries, and their total.
func (s *Store) Summaries(ctx context.Context, tenant, prefix string, window time.Duration, now time.Time, fn func(name string, s *apollo.Summary)) (apollo.Summary, error) {
	return metrics.SummariesOf(ctx, s, tenant, prefix, window, now, fn)
}

// Series returns the job's points over the window ending at now (zero: the
// store's clock).
func (s *Store) Series(ctx context.Context, tenant, name string, window, step time.Duration, now time.Time) ([]apollo.Point, error) {
	clockNow := s.clock.Now()
	if now.IsZero() {
		now = clockNow
	}
	sp, err := s.span(window, 0, now, clockNow)
	if err != nil {
		return nil, err
	}
	if err := metrics.CheckStep(window, step); err != nil {
		return nil, err
	}
	writers, err := s.c.ZRange(ctx, s.keys.writers(), 0, -1).Result()
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redisstore: series of %q: writers: %w", name, err)
	}
	if err := s.checkWriters(writers); err != nil {
		return nil, err
	}
	stepMs := step.Milliseconds()
	pts := make([]apollo.Point, window/step)
	bounds := make([]int64, len(pts)+1)
	for i := range bounds {
		bounds[i] = sp.Start + int64(i)*stepMs
	}
	p := newReadPlan(sp, bounds, maxTime(now, clockNow), writers)
	err = s.read(ctx, tenant, []string{name}, &p, func(_ int, d *jobData) {
		for i := range pts {
			pts[i].T = bounds[i]
			d.summarize(&p, bounds[i], bounds[i+1], &pts[i].Summary)
			pts[i].Window = step
		}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: series of %q: %w", name, err)
	}
	return pts, nil
}

// span resolves a window like the Aggregator: bounds older than what the
// writers keep (by the store's clock) read from the next level, so the
// answer does not depend on when the writers last trimmed.
func (s *Store) span(window, offset time.Duration, now, clockNow time.Time) (metrics.Span, error) {
	sp, err := metrics.ResolveSpan(window, offset, now, s.br, s.rr)
	if err != nil {
		return sp, err
	}
	sp.Split = max(sp.Split, metrics.Horizon(clockNow, s.br))
	sp.Floor = max(sp.Floor, metrics.Horizon(clockNow, s.rr))
	return sp, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// read fetches the plan's fields of each job, in pipelines of readChunk
// jobs, and calls fn with each job's data.
func (s *Store) read(ctx context.Context, tenant string, names []string, p *readPlan, fn func(i int, d *jobData)) error {
	per := readChunk
	d := p.newJobData()
	for lo := 0; lo < len(names); lo += per {
		hi := min(len(names), lo+per)
		pipe := s.c.Pipeline()
		cmds := make([]*redis.SliceCmd, hi-lo)
		for i, name := range names[lo:hi] {
			cmds[i] = pipe.HMGet(ctx, s.keys.window(tenant, name), p.fields...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for i, cmd := range cmds {
			if err := d.load(p, cmd.Val()); err != nil {
				return fmt.Errorf("job %q: %w", names[lo+i], err)
			}
			fn(lo+i, d)
		}
	}
	return nil
}
