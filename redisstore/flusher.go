package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/metrics"
)

// flushChunk is how many jobs go into one pipeline: a failed pipeline is
// retried whole, and Redis answers a pipeline's commands in one go.
const flushChunk = 256

// finalFlushTimeout bounds the flush Stop makes.
const finalFlushTimeout = 10 * time.Second

// Flusher copies an Aggregator's changes to Redis. It is the bus's
// observer in place of the Aggregator: Apply hands each change on and
// marks the jobs it touched; every FlushInterval the marked jobs' changed
// buckets are written as absolute values.
type Flusher struct {
	agg   *metrics.Aggregator
	opts  Options
	keys  keyspace
	c     redis.UniversalClient
	clock apollo.Clock
	log   *slog.Logger
	dirty *dirtySet
	// retired are the gauge fields of Options.Retire, deleted from each
	// job's key at its first write (queueRetire).
	retired []string

	// flushMu serializes flushes and guards what they keep.
	flushMu   sync.Mutex
	jobs      map[jobRef]*jobState
	queue     []*jobState // maintenance order: by nextMaint, oldest first
	writersAt int64       // when the writer's score was last written, ms
	trimmedAt int64       // when the names indexes were last trimmed, ms
	ex        metrics.Export
	buf       []byte
	failing   int       // flushes failed in a row
	loggedAt  time.Time // last failure logged

	stats flushStats

	life lifecycle.Group // the flush loop

	// flushed, set by tests, receives the result of every flush the loop
	// makes.
	flushed chan error
}

var _ interface{ Apply(*apollo.Change) } = (*Flusher)(nil)

// jobState is what the flusher keeps per job it has written.
type jobState struct {
	jobRef
	written   int64 // last data write, ms
	nextMaint int64 // when to trim the key and push its expiry back, ms
}

type flushStats struct {
	flushes, failures, fullCopies atomic.Int64
	refills                       atomic.Int64
	jobs, fields, commands        atomic.Int64
	lastFlush                     atomic.Int64 // Unix ms of the last good flush
	lastErr                       atomic.Pointer[string]
}

// NewFlusher returns a Flusher for agg. Call Start to flush on a timer, or
// Flush yourself.
func NewFlusher(agg *metrics.Aggregator, opts Options) (*Flusher, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if agg == nil {
		return nil, &apollo.Error{Code: apollo.EINVALID, Field: "redisstore.NewFlusher", Message: "no aggregator", Hint: "pass the bus's metrics.Aggregator"}
	}
	f := &Flusher{
		agg: agg, opts: opts, keys: keyspace{opts.Prefix}, c: opts.Client,
		clock: opts.Clock, log: opts.Logger, dirty: newDirtySet(opts.MaxDirty),
		jobs: make(map[jobRef]*jobState), life: lifecycle.Group{Name: "redisstore: flusher", Restart: true},
	}
	for _, w := range opts.Retire {
		f.retired = append(f.retired, fieldName(kindGauge, 0, w))
	}
	return f, nil
}

// Apply counts c in the aggregator and marks the jobs it touched. Safe
// from many goroutines, like Aggregator.Apply.
func (f *Flusher) Apply(c *apollo.Change) {
	now := f.clock.Now() // before Apply: see metrics.Touched
	f.agg.Apply(c)
	metrics.Touched(c, now, f.dirty.mark)
}

// Start flushes every FlushInterval on the clock until Stop. The first
// flush, made at once, copies every job: after a restart Redis may lag the
// aggregator restored from its snapshot.
func (f *Flusher) Start(ctx context.Context) error {
	return f.life.Start(ctx, func(context.Context) error {
		f.dirty.overflow.Store(true)
		tick := f.clock.NewTicker(f.opts.FlushInterval)
		f.life.Go(func(ctx context.Context) error { f.loop(ctx, tick); return nil })
		return nil
	})
}

// Stop ends the timer, flushes one last time (for at most 10 s) and
// waits, or waits for ctx; it returns the last flush's error. It may be
// called any number of times, also without Start.
func (f *Flusher) Stop(ctx context.Context) error {
	return f.life.StopThen(ctx, f.finalFlush)
}

func (f *Flusher) loop(ctx context.Context, tick apollo.Ticker) {
	defer tick.Stop()
	f.report(ctx, f.Flush(ctx))
	for {
		select {
		case <-tick.C():
			f.report(ctx, f.Flush(ctx))
		case <-ctx.Done():
			return
		}
	}
}

func (f *Flusher) finalFlush() error {
	ctx, cancel := context.WithTimeout(context.Background(), finalFlushTimeout)
	defer cancel()
	err := f.Flush(ctx)
	if err != nil {
		f.log.Error("redisstore: last flush failed; Redis lags the aggregator until the next start copies everything",
			"err", err, "jobsNotWritten", f.dirty.len())
	}
	return err
}

func (f *Flusher) report(ctx context.Context, err error) {
	if f.flushed != nil {
		select {
		case f.flushed <- err:
		case <-ctx.Done():
		}
	}
}

// Flush writes every job changed since the last good flush. On error the
// jobs not written stay marked for the next one.
func (f *Flusher) Flush(ctx context.Context) error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	now := f.clock.Now()
	jobs, full := f.dirty.take()
	if full {
		f.stats.fullCopies.Add(1)
		jobs = f.everything(now)
	}
	lost, err := f.probe(ctx, jobs, full)
	if err == nil && !lost {
		lost, err = f.writeJobs(ctx, now, jobs, full)
	}
	if err == nil && lost {
		err = f.refill(ctx, now)
	}
	if err == nil {
		err = f.maintain(ctx, now)
	}
	f.stats.flushes.Add(1)
	if err == nil || ctx.Err() == nil {
		// A flush its caller gave up on (Stop cancels the loop's; the
		// last flush follows) did not fail: its jobs stay marked.
		f.noteResult(now, err)
	}
	if err != nil {
		return fmt.Errorf("redisstore: flush: %w", err)
	}
	return nil
}

// everything lists every job the aggregator holds, to copy from the start
// of the rollup retention.
func (f *Flusher) everything(now time.Time) []dirtyJob {
	from := metrics.Horizon(now, f.opts.RollupRetention)
	var jobs []dirtyJob
	f.agg.Jobs(func(tenant, name string) bool {
		jobs = append(jobs, dirtyJob{jobRef{tenant, name}, from})
		return true
	})
	return jobs
}

// writeJobs writes jobs in pipelines of flushChunk. On an error it puts
// the unwritten jobs back (or, for a full copy, asks for another). lost
// reports that a job written before found its key gone (see refill.go).
func (f *Flusher) writeJobs(ctx context.Context, now time.Time, jobs []dirtyJob, full bool) (lost bool, err error) {
	ms := now.UnixMilli()
	first := true
	for len(jobs) > 0 {
		chunk := jobs[:min(len(jobs), flushChunk)]
		pipe := f.c.Pipeline()
		if first && ms-f.writersAt >= f.opts.MaintainEvery.Milliseconds()/4 {
			// Readers sum the writers they know: announce this one before
			// its first field, and often enough that no trim drops it.
			f.queueAnnounce(ctx, pipe, ms)
		}
		var written []*jobState
		var fresh []jobRef
		var known []sentFields
		for _, j := range chunk {
			hset, n := f.queueJob(ctx, pipe, j)
			if hset == nil {
				continue
			}
			st := f.jobs[j.jobRef]
			if st == nil {
				fresh = append(fresh, j.jobRef)
				key := f.keys.window(j.tenant, j.name)
				pipe.PExpire(ctx, key, f.opts.keyTTL())
				f.queueRetire(ctx, pipe, key)
			} else {
				known = append(known, sentFields{hset, n})
			}
			written = append(written, st)
		}
		f.queueNames(ctx, pipe, ms, fresh)
		n := int64(pipe.Len())
		if _, err := pipe.Exec(ctx); err != nil {
			if full {
				f.dirty.overflow.Store(true)
			} else {
				f.dirty.putBack(jobs)
			}
			return false, err
		}
		f.stats.commands.Add(n)
		lost = lost || keyWasGone(known)
		if first {
			f.writersAt = ms
			first = false
		}
		for i, st := range written {
			if st == nil { // the fresh ones, in order
				st = f.newJob(fresh[0], ms)
				fresh = fresh[1:]
				written[i] = st
			}
			st.written = ms
		}
		f.stats.jobs.Add(int64(len(written)))
		jobs = jobs[len(chunk):]
	}
	return lost, nil
}

// queueJob adds one job's HSET to pipe and returns it with the number of
// fields it sets; nil if the job had nothing to write. Every block from
// the one holding j.from on is written whole, so the write does not
// depend on what Redis held before.
func (f *Flusher) queueJob(ctx context.Context, pipe redis.Pipeliner, j dirtyJob) (*redis.IntCmd, int) {
	ex := &f.ex
	if !f.agg.ExportJob(j.tenant, j.name, blockOf(kindBucket, j.from), blockOf(kindRollup, j.from), ex) {
		return nil, 0 // compacted away: nothing left in any window
	}
	args := make([]any, 0, 8)
	args = f.appendBlocks(args, kindBucket, ex.Buckets)
	args = f.appendBlocks(args, kindRollup, ex.Rollups)
	v := vals{ex.Backlog, ex.Running}
	f.buf = appendVals(f.buf[:0], &v, nGauge)
	args = append(args, fieldName(kindGauge, 0, f.opts.Writer), string(f.buf))
	hset := pipe.HSet(ctx, f.keys.window(j.tenant, j.name), args...)
	f.stats.fields.Add(int64(len(args) / 2))
	return hset, len(args) / 2
}

// appendBlocks appends a field and value per block of the entries es.
func (f *Flusher) appendBlocks(args []any, kind byte, es []metrics.Entry) []any {
	for len(es) > 0 {
		start := blockOf(kind, es[0].Start)
		n := 1
		for n < len(es) && es[n].Start < start+span(kind) {
			n++
		}
		f.buf = appendBlock(f.buf[:0], start, width(kind), es[:n])
		args = append(args, fieldName(kind, start, f.opts.Writer), string(f.buf))
		es = es[n:]
	}
	return args
}

// queueRetire deletes the retired writers' gauge levels from a job's key
// (Options.Retire): their tasks pending and running belong to a log no
// bus holds any more, and would be summed as such until the key expired.
// Their counts stay. At a level's bound in the past, the retired writer's
// moves since then are still subtracted: the levels read for a time before
// the retirement are lowered by the retired levels (never below zero).
func (f *Flusher) queueRetire(ctx context.Context, pipe redis.Pipeliner, key string) {
	if len(f.retired) > 0 {
		pipe.HDel(ctx, key, f.retired...)
	}
}

// queueAnnounce adds or renews the writer in the writers set.
func (f *Flusher) queueAnnounce(ctx context.Context, pipe redis.Pipeliner, ms int64) {
	pipe.ZAddArgs(ctx, f.keys.writers(), redis.ZAddArgs{GT: true, Members: []redis.Z{{Score: float64(ms), Member: f.opts.Writer}}})
	pipe.PExpire(ctx, f.keys.writers(), f.opts.keyTTL())
}

// queueNames adds jobs to their tenants' name indexes, scored now.
func (f *Flusher) queueNames(ctx context.Context, pipe redis.Pipeliner, ms int64, jobs []jobRef) {
	byTenant := map[string][]redis.Z{}
	for _, j := range jobs {
		byTenant[j.tenant] = append(byTenant[j.tenant], redis.Z{Score: float64(ms), Member: j.name})
	}
	for tenant, zs := range byTenant {
		key := f.keys.names(tenant)
		pipe.ZAddArgs(ctx, key, redis.ZAddArgs{GT: true, Members: zs})
		pipe.PExpire(ctx, key, f.opts.keyTTL())
	}
}

// newJob starts keeping a job and queues its first maintenance.
func (f *Flusher) newJob(r jobRef, ms int64) *jobState {
	st := &jobState{jobRef: jobRef{strings.Clone(r.tenant), strings.Clone(r.name)}}
	f.jobs[st.jobRef] = st
	f.enqueue(st, ms)
	return st
}

func (f *Flusher) enqueue(st *jobState, ms int64) {
	st.nextMaint = ms + f.opts.MaintainEvery.Milliseconds()
	f.queue = append(f.queue, st)
}

// noteResult counts a flush and logs failures at most once a minute, and
// the recovery once.
func (f *Flusher) noteResult(now time.Time, err error) {
	if err == nil {
		f.stats.lastFlush.Store(now.UnixMilli())
		if f.failing > 0 {
			f.log.Info("redisstore: flushing again", "failedFlushes", f.failing)
			f.failing = 0
		}
		return
	}
	msg := err.Error()
	f.stats.lastErr.Store(&msg)
	f.stats.failures.Add(1)
	f.failing++
	if f.failing == 1 || now.Sub(f.loggedAt) >= time.Minute {
		f.log.Warn("redisstore: flush failed; changes are kept and retried", "err", err,
			"failedFlushes", f.failing, "jobsWaiting", f.dirty.len(), "copyAll", f.dirty.overflow.Load())
		f.loggedAt = now
	}
}

// Stats are counters about a Flusher, for monitoring.
type Stats struct {
	Flushes    int64     // flushes made, good or not
	Failures   int64     // flushes that failed
	FullCopies int64     // flushes that copied every job: at start, after the dirty set overflowed, and at a refill
	Refills    int64     // times Redis was found to have lost what the flusher wrote (restarted empty, flushed)
	Jobs       int64     // job writes
	Fields     int64     // hash fields written
	Commands   int64     // Redis commands sent by good flushes
	Dirty      int64     // jobs waiting for the next flush
	CopyAll    bool      // the next flush copies every job
	LastFlush  time.Time // end of the last good flush; zero before the first
	LastError  string    // of the last failed flush
}

// Stats returns the flusher's counters.
func (f *Flusher) Stats() Stats {
	s := Stats{
		Flushes: f.stats.flushes.Load(), Failures: f.stats.failures.Load(), FullCopies: f.stats.fullCopies.Load(),
		Refills: f.stats.refills.Load(), Jobs: f.stats.jobs.Load(), Fields: f.stats.fields.Load(), Commands: f.stats.commands.Load(),
		Dirty: f.dirty.len(), CopyAll: f.dirty.overflow.Load(),
	}
	if ms := f.stats.lastFlush.Load(); ms != 0 {
		s.LastFlush = time.UnixMilli(ms)
	}
	if e := f.stats.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}
