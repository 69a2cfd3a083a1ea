package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis can lose everything the flusher wrote while the bus runs: a
// restart without persistence, a FLUSHDB, a failover to a replica that had
// not caught up. Only the jobs that change would be written again, and not
// even those would be found, since a job enters the names index once. The
// alert processes' rate rules would read empty windows and resolve, with
// nobody told why. So the flusher checks, at no cost while it writes jobs
// it wrote before: a job's HSET answers how many of its fields were new,
// and a job written before always has its gauge field, so "every field
// was new" means its key was gone. A flush that writes no such job asks
// for its writer's entry in the writers set instead (one ZSCORE). Either
// way, a loss makes the flusher forget what it wrote and copy every job as
// at a start.

// sentFields is one job's HSET and the number of fields it set.
type sentFields struct {
	hset *redis.IntCmd
	n    int
}

// keyWasGone reports whether the HSET of a job written before created
// every field it set.
func keyWasGone(known []sentFields) bool {
	for _, k := range known {
		if k.hset.Val() == int64(k.n) {
			return true
		}
	}
	return false
}

// probe asks whether the writer's entry in the writers set is still there,
// when this flush cannot tell from its own writes: nothing written yet
// (nothing to lose), or no job among jobs that was written before.
func (f *Flusher) probe(ctx context.Context, jobs []dirtyJob, full bool) (lost bool, err error) {
	if f.writersAt == 0 {
		return false, nil
	}
	for _, j := range jobs {
		if f.jobs[j.jobRef] != nil {
			return false, nil // its HSET will tell
		}
	}
	err = f.c.ZScore(ctx, f.keys.writers(), f.opts.Writer).Err()
	f.stats.commands.Add(1)
	if errors.Is(err, redis.Nil) {
		return true, nil
	}
	if err != nil {
		if full {
			f.dirty.overflow.Store(true)
		} else {
			f.dirty.putBack(jobs)
		}
		return false, err
	}
	return false, nil
}

// refill forgets what the flusher wrote and copies every job again, with
// the names indexes, as the first flush after Start. The writer is
// announced last: a Store with RequireWriters refuses to answer until
// then, so the alert engine keeps its alerts rather than resolving them
// on the jobs not copied yet.
func (f *Flusher) refill(ctx context.Context, now time.Time) error {
	f.stats.refills.Add(1)
	f.log.Warn("redisstore: Redis lost the metrics the bus wrote (restarted empty, flushed, or failed over); copying every job again",
		"jobs", len(f.jobs))
	clear(f.jobs)
	f.queue = f.queue[:0]
	ms := now.UnixMilli()
	f.writersAt = ms // not announced by writeJobs: below, once all is copied
	f.stats.fullCopies.Add(1)
	if _, err := f.writeJobs(ctx, now, f.everything(now), true); err != nil {
		f.writersAt = 0
		return fmt.Errorf("copying every job after Redis lost them: %w", err)
	}
	pipe := f.c.Pipeline()
	f.queueAnnounce(ctx, pipe, ms)
	if _, err := pipe.Exec(ctx); err != nil {
		f.writersAt = 0
		f.dirty.overflow.Store(true)
		return fmt.Errorf("announcing the writer after copying every job: %w", err)
	}
	f.stats.commands.Add(2)
	return nil
}
