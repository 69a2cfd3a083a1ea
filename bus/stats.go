package bus

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

type counters struct {
	accepted, duplicate, illegal, invalid, held, refused atomic.Int64
	parked, waitEnded, timeouts, missedStarts            atomic.Int64
	corrections, evicted, replayed, logErrors            atomic.Int64
}

// Stats are the bus's counters (since start) and gauges (now).
type Stats struct {
	Accepted    int64 `json:"accepted"`
	Duplicate   int64 `json:"duplicate"`
	Illegal     int64 `json:"illegal"`
	Invalid     int64 `json:"invalid"`
	Held        int64 `json:"held"`      // events that went over their task's queue limit
	Refused     int64 `json:"refused"`   // events answered retry_later, each one: not stored (a limit reached, stopping, the log failed)
	Parked      int64 `json:"parked"`    // events answered waiting: ahead of a missing earlier one
	WaitEnded   int64 `json:"waitEnded"` // of those, applied when the reorder window ended without the missing ones
	Timeouts    int64 `json:"timeouts"`
	MissedStart int64 `json:"missedStarts"`
	Corrections int64 `json:"corrections"`
	Evicted     int64 `json:"evicted"`
	Replayed    int64 `json:"replayed"`
	LogErrors   int64 `json:"logErrors"`

	Tasks          int64  `json:"tasks"`          // in memory
	Queues         int64  `json:"queues"`         // tasks with changes waiting
	Queued         int64  `json:"queued"`         // changes waiting
	Holding        int64  `json:"holding"`        // changes in the holding area
	HoldLimit      int64  `json:"holdLimit"`      //
	Waiting        int64  `json:"waiting"`        // out-of-order events waiting now
	Tombstones     int64  `json:"tombstones"`     //
	Deadlines      int64  `json:"deadlines"`      //
	Subscribers    int64  `json:"subscribers"`    //
	SubscribersCut int64  `json:"subscribersCut"` // cut off for being slow
	LastLSN        uint64 `json:"lastLSN"`
}

// Stats returns the counters and gauges.
func (b *Bus) Stats() Stats {
	c := &b.stats
	return Stats{
		Accepted: c.accepted.Load(), Duplicate: c.duplicate.Load(), Illegal: c.illegal.Load(),
		Invalid: c.invalid.Load(), Held: c.held.Load(), Refused: c.refused.Load(),
		Parked: c.parked.Load(), WaitEnded: c.waitEnded.Load(), Timeouts: c.timeouts.Load(),
		MissedStart: c.missedStarts.Load(), Corrections: c.corrections.Load(), Evicted: c.evicted.Load(),
		Replayed: c.replayed.Load(), LogErrors: c.logErrors.Load(),
		Tasks: b.ntasks.Load(), Queues: b.queues.Load(), Queued: b.queued.Load(), Holding: b.held.Load(),
		HoldLimit: int64(b.opts.HoldLimit), Waiting: b.parked.Load(), Tombstones: int64(b.tombs.len()),
		Deadlines: int64(b.timers.len()), Subscribers: int64(b.fan.Len()), SubscribersCut: b.fan.Cut(),
		LastLSN: b.lsn.Load(),
	}
}

// sweepLoop moves finished tasks out of memory after the retention, and
// unfinished ones after the idle retention, until Stop.
func (b *Bus) sweepLoop(ctx context.Context) error {
	every := min(b.opts.Retention/10, time.Minute)
	every = max(every, time.Second)
	tick := b.opts.Clock.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
			b.Sweep()
		case <-ctx.Done():
			return nil
		}
	}
}

// Sweep evicts what has outlived its retention now. The sweeper calls it;
// tests may too.
func (b *Bus) Sweep() {
	b.pause.RLock() // a checkpoint sees a task or its tombstone, never neither
	defer b.pause.RUnlock()
	now := b.opts.Clock.Now()
	b.tombs.rotate(now)
	finishedBefore := now.Add(-b.opts.Retention).UnixMilli()
	idleBefore := now.Add(-b.opts.IdleRetention).UnixMilli()
	var out []*apollo.Task
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		var gone []*task
		s.each(func(h uint64, t *task) {
			if t.queued || len(t.waiting()) > 0 {
				return
			}
			final := t.status.Final()
			if !(final && t.updatedAt < finishedBefore || !final && t.updatedAt < idleBefore) {
				return
			}
			gone = append(gone, t)
		})
		for _, t := range gone {
			k := t.key()
			h := hashKey(k)
			b.dropTask(s, h, t)
			b.tombs.put(h, t.seq)
			b.stats.evicted.Add(1)
			if b.opts.Archive != nil && t.status != apollo.StatusNone {
				v := t.view(k)
				v.History = t.decodeHistory(k)
				out = append(out, &v)
			}
		}
		s.mu.Unlock()
		for _, v := range out { // outside the lock: the archive does I/O
			if err := b.opts.Archive.Put(v); err != nil {
				if ok, _ := b.warn.Allow("", now); ok {
					b.log.Error("archiving a finished task failed; it is no longer queryable", "task", v.TaskID, "err", err)
				}
			}
		}
		out = out[:0]
	}
}
