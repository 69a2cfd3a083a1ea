package bus

import (
	"context"

	"github.com/apollo-11/apollo"
)

// maxBatch bounds how many changes a worker takes from one task at a time,
// so that one busy task cannot hold a worker for long.
const maxBatch = 128

// worker delivers queued changes until Stop.
func (b *Bus) worker(ctx context.Context) error {
	var batch []*apollo.Change // reused: one worker delivers one batch at a time
	for {
		rt, ok := b.ready.pop(ctx.Done())
		if !ok {
			return nil
		}
		batch = b.deliver(ctx, rt, batch)
	}
}

// deliver hands a batch of one task's changes to the observers and
// subscribers, then releases the task's queue or puts it back on the ready
// list. It returns buf for the next call.
func (b *Bus) deliver(ctx context.Context, rt readyTask, buf []*apollo.Change) []*apollo.Change {
	if b.opts.testGate != nil {
		b.opts.testGate()
	}
	s, t := rt.s, rt.t
	s.mu.Lock()
	q := t.side.q
	before := len(q)
	n := min(before, maxBatch)
	batch := append(buf[:0], q[:n]...)
	rest := copy(q, q[n:]) // to the front: the array is reused (shard.giveBack)
	clear(q[rest:])
	t.side.q = q[:rest]
	s.mu.Unlock()

	// Nothing is told before its record is durable under the log's sync
	// policy: the observers, the live ones (event rules, the feed of the
	// alert processes) and the stream's clients would otherwise act on,
	// or show, a decision that a kill -9 takes back. A batch whose
	// records the log failed to keep is not told at all; the process
	// stops, and the reporters resend what was not answered.
	if b.durable(ctx, batch) {
		for _, c := range batch {
			for _, o := range b.opts.Observers {
				o.Apply(c)
			}
			for _, o := range b.opts.Live {
				o.Apply(c)
			}
			b.fan.Publish(c)
		}
	}
	if b.live.on {
		b.live.delivered(batch) // before the queue count: a checkpoint drains both
	}

	s.mu.Lock()
	overBefore := max(0, before-b.opts.TaskQueueLen)
	overAfter := max(0, before-n-b.opts.TaskQueueLen)
	b.held.Add(-int64(overBefore - overAfter))
	if len(t.side.q) == 0 {
		t.queued = false
		b.queues.Add(-1)
		s.giveBack(t)
	} else {
		b.ready.push(rt)
	}
	s.mu.Unlock()
	left := b.queued.Add(-int64(n))
	if left == 0 {
		b.drainMu.Lock()
		b.drained.Broadcast()
		b.drainMu.Unlock()
	}
	if left < b.roomMark() && b.roomWanted.Load() && b.roomWanted.CompareAndSwap(true, false) {
		select {
		case b.room <- struct{}{}:
		default:
		}
	}
	clear(batch) // let delivered changes go
	return batch
}

// roomMark is the low-water mark of the queues: a deadline loop waiting for
// room goes on once fewer changes than this are queued. A sixteenth below
// the limit, so that it fires in runs instead of one deadline per delivered
// change, and not lower, so that reports kept just under the limit do not
// starve it.
func (b *Bus) roomMark() int64 {
	limit := int64(b.opts.QueueLimit)
	return max(limit-limit/16, 1)
}

// waitRoom returns once the queues hold fewer changes than QueueLimit, or
// false when ctx ends. The deadline loop fires through it: the bus's own
// records (timeouts, missed starts) wait for room as a refused reporter
// does, so that a mass of deadlines falling due at once (a restart after
// downtime, a scheduler that died with its runs) keeps at most QueueLimit
// changes in memory instead of one per task.
func (b *Bus) waitRoom(ctx context.Context) bool {
	limit := int64(b.opts.QueueLimit)
	for b.queued.Load() >= limit {
		b.roomWanted.Store(true)
		// Look again after saying so: a worker that took the queues under
		// the mark before it could see roomWanted has been missed.
		if b.queued.Load() < b.roomMark() {
			b.roomWanted.Store(false)
			break
		}
		if b.opts.testRoomWait != nil {
			b.opts.testRoomWait()
		}
		select {
		case <-b.room:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// waitDrained returns when no change is queued. Callers hold b.pause for
// writing (or the bus is closed), so no new change can be queued meanwhile.
func (b *Bus) waitDrained() {
	b.drainMu.Lock()
	for b.queued.Load() > 0 {
		b.drained.Wait()
	}
	b.drainMu.Unlock()
}

// WaitDrained returns when no change is queued for delivery (every change
// published so far has reached the observers and subscribers), or with
// ctx's error. Unlike Checkpoint it does not stop Publish: a change
// published meanwhile extends the wait. Tests use it to act only once the
// bus has delivered what they published.
func (b *Bus) WaitDrained(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		b.drainMu.Lock()
		b.drained.Broadcast()
		b.drainMu.Unlock()
	})
	defer stop()
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	for b.queued.Load() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.drained.Wait()
	}
	return nil
}

// Subscribe returns a subscription to the changes the bus applies, with
// room for buffer changes. A subscriber that lets its buffer fill is cut
// off: the bus never waits.
func (b *Bus) Subscribe(buffer int) *Subscription { return b.fan.Subscribe(buffer) }

// durable waits until the log holds the records whose decisions made
// batch, and reports whether it does. One wait serves many batches: the
// log makes a whole group of records durable at once, and the batches
// decided before it pass at once.
func (b *Bus) durable(ctx context.Context, batch []*apollo.Change) bool {
	if b.opts.Log == nil {
		return true
	}
	var last uint64
	for _, c := range batch {
		last = max(last, c.LSN)
	}
	if last == 0 {
		return true
	}
	return b.opts.Log.Wait(ctx, last) == nil
}
