package redisstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/metrics"
)

// maintainBatch bounds the jobs one flush maintains, so that a flush after
// a long outage does not stall on maintenance.
const maintainBatch = 1000

// trimMargin is how long after leaving the retention a field is deleted,
// so that a reader whose clock is a little behind the writer's still finds
// every field its windows need.
const trimMargin = 5 * time.Minute

// maintain visits the jobs whose maintenance is due: it deletes their
// expired fields, pushes their key's expiry back while they still matter,
// and refreshes their place in the names index; once per MaintainEvery it
// also trims the names indexes and the writers set. Jobs that have neither
// tasks pending or running nor data within the rollup retention are
// forgotten, and their keys left to expire.
func (f *Flusher) maintain(ctx context.Context, now time.Time) error {
	ms := now.UnixMilli()
	n := 0
	for n < len(f.queue) && n < maintainBatch && f.queue[n].nextMaint <= ms {
		n++
	}
	due := f.queue[:n]
	trim := ms-f.trimmedAt >= f.opts.MaintainEvery.Milliseconds()
	if n == 0 && !trim {
		return nil
	}
	fields := make([]*redis.StringSliceCmd, n)
	if n > 0 {
		pipe := f.c.Pipeline()
		for i, st := range due {
			fields[i] = pipe.HKeys(ctx, f.keys.window(st.tenant, st.name))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("maintenance: reading fields: %w", err)
		}
		f.stats.commands.Add(int64(n))
	}
	h0 := metrics.Horizon(now, f.opts.BucketRetention) - trimMargin.Milliseconds()
	h1 := metrics.Horizon(now, f.opts.RollupRetention) - trimMargin.Milliseconds()
	pipe := f.c.Pipeline()
	keep := make([]bool, n)
	var named []jobRef
	for i, st := range due {
		key := f.keys.window(st.tenant, st.name)
		if stale := staleFields(fields[i].Val(), h0, h1); len(stale) > 0 {
			pipe.HDel(ctx, key, stale...)
		}
		if keep[i] = f.alive(st, ms); keep[i] {
			pipe.PExpire(ctx, key, f.opts.keyTTL())
			named = append(named, st.jobRef)
		}
	}
	f.queueNames(ctx, pipe, ms, named)
	if trim {
		f.queueTrim(ctx, pipe, ms)
	}
	cmds := int64(pipe.Len())
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("maintenance: %w", err)
	}
	f.stats.commands.Add(cmds)
	f.queue = f.queue[n:]
	for i, st := range due {
		if keep[i] {
			f.enqueue(st, ms)
		} else {
			delete(f.jobs, st.jobRef)
		}
	}
	if trim {
		f.trimmedAt, f.writersAt = ms, ms
	}
	return nil
}

// alive reports whether a job's key must be kept: it has tasks pending or
// running, or data inside the rollup retention.
func (f *Flusher) alive(st *jobState, ms int64) bool {
	if !f.agg.ExportJob(st.tenant, st.name, math.MaxInt64, math.MaxInt64, &f.ex) {
		return false
	}
	return f.ex.Backlog != 0 || f.ex.Running != 0 || ms-st.written < f.opts.RollupRetention.Milliseconds()
}

// queueTrim drops names and writers not written for longer than a key
// lives: their keys are gone. It renews this writer's entry first: a
// writer idle for that long still has its gauge levels to be read, and
// its entry is what tells it that Redis lost its data (refill.go).
func (f *Flusher) queueTrim(ctx context.Context, pipe redis.Pipeliner, ms int64) {
	f.queueAnnounce(ctx, pipe, ms)
	cut := "(" + fmt.Sprint(ms-f.opts.keyTTL().Milliseconds())
	tenants := map[string]bool{}
	for r := range f.jobs {
		tenants[r.tenant] = true
	}
	for t := range tenants {
		pipe.ZRemRangeByScore(ctx, f.keys.names(t), "-inf", cut)
	}
	pipe.ZRemRangeByScore(ctx, f.keys.writers(), "-inf", cut)
}

// staleFields returns the bucket blocks that end before h0 and the rollup
// blocks that end before h1, of any writer. Fields this package did not
// write are left alone.
func staleFields(fields []string, h0, h1 int64) []string {
	var out []string
	for _, fl := range fields {
		kind, start, _, ok := parseField(fl)
		end := start + span(kind)
		if ok && (kind == kindBucket && end <= h0 || kind == kindRollup && end <= h1) {
			out = append(out, fl)
		}
	}
	return out
}
