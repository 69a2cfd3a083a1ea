package bus

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

type deadlineKind uint8

const (
	dTimeout     deadlineKind = iota + 1 // a running task passes its timeout
	dMissedStart                         // a pending task was not started in time
	dParked                              // an out-of-order event stops waiting
)

// deadline is a moment at which the bus must look at a task again. Entries
// are not removed when the task moves on: each is checked when it fires.
type deadline struct {
	at   int64 // Unix ms, on the server's clock
	k    key
	kind deadlineKind
	seq  int64 // the task's sequence when armed
}

// deadlines is a timing wheel with one slot per second: pushing is a map
// lookup and an append, however many tasks wait, and only the distinct
// seconds are kept in a heap. A deadline fires within a second after its
// time, which is precise enough for timeouts and missed starts.
//
// The wheel is striped by the task's shard: a deadline is pushed under its
// shard's lock, and the replay's workers each take whole shards (shard %
// workers), so with up to four workers no two push into one stripe. One wheel for every shard had
// both cores take one lock and append to one slot per new task, the lock's
// and the slot's cache lines moving between them: deadlines.push was 6% of
// a replay of a million new tasks, a third of it in the lock (issue 20.4).
type deadlines struct {
	stripes [deadlineStripes]wheel
	wake    chan struct{}
}

// deadlineStripes divides numShards; a shard's stripe is shard % it. Each
// stripe starts its own slot for a second, so more stripes cost more
// allocations on a quiet server (TestPublishOneEventAllocations: 2.14 per
// event with one wheel, 2.38 with four, 3.28 with sixteen).
const deadlineStripes = 4

type wheel struct {
	mu    sync.Mutex
	slots map[int64]*slot // by second, rounded up
	secs  secondHeap
	n     int
	_     [64]byte // a stripe's lock and its neighbour's on separate cache lines
}

func newDeadlines() *deadlines {
	d := &deadlines{wake: make(chan struct{}, 1)}
	for i := range d.stripes {
		d.stripes[i].slots = map[int64]*slot{}
	}
	return d
}

// slot holds the deadlines of one second in chunks that are never copied:
// at a hundred thousand events a second a slot takes tens of thousands,
// and growing one slice for them copied each several times and left the
// old arrays to the collector. Chunks start small, for the slots of a quiet
// server, and double up to maxSlotChunk.
type slot struct {
	chunks [][]deadline
	n      int
}

const maxSlotChunk = 512 // 512 deadlines of 56 bytes: 28 KiB

func (s *slot) add(x deadline) {
	last := len(s.chunks) - 1
	if last < 0 || len(s.chunks[last]) == cap(s.chunks[last]) {
		size := 4
		if last >= 0 {
			size = min(2*cap(s.chunks[last]), maxSlotChunk)
		}
		s.chunks = append(s.chunks, make([]deadline, 0, size))
		last++
	}
	s.chunks[last] = append(s.chunks[last], x)
	s.n++
}

// all yields the slot's deadlines in the order they came, without copying
// them: a slot can hold a million.
func (s *slot) all(yield func(deadline) bool) {
	for _, c := range s.chunks {
		for _, x := range c {
			if !yield(x) {
				return
			}
		}
	}
}

// slotOf rounds a time in ms up to the second its slot fires at.
func slotOf(at int64) int64 { return (at + 999) / 1000 * 1000 }

// push registers x, a deadline of a task in shard.
func (d *deadlines) push(shard uint8, x deadline) {
	sec := slotOf(x.at)
	w := &d.stripes[shard%deadlineStripes]
	w.mu.Lock()
	sl, ok := w.slots[sec]
	if !ok {
		sl = &slot{}
		w.slots[sec] = sl
		heap.Push(&w.secs, sec)
	}
	sl.add(x)
	w.n++
	first := w.secs[0] == sec
	w.mu.Unlock()
	if first && !ok { // the stripe's earliest: perhaps the earliest of all
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// due takes every slot at or before now, oldest first across the stripes;
// next is the time of the earliest slot left (0 if none).
func (d *deadlines) due(now int64) (out []*slot, next int64) {
	type dueSlot struct {
		sec int64
		sl  *slot
	}
	var taken []dueSlot
	for i := range d.stripes {
		w := &d.stripes[i]
		w.mu.Lock()
		for len(w.secs) > 0 && w.secs[0] <= now {
			sec := heap.Pop(&w.secs).(int64)
			sl := w.slots[sec]
			taken = append(taken, dueSlot{sec, sl})
			w.n -= sl.n
			delete(w.slots, sec)
		}
		if len(w.secs) > 0 && (next == 0 || w.secs[0] < next) {
			next = w.secs[0]
		}
		w.mu.Unlock()
	}
	// A stripe's slots come out in order; across stripes, by second.
	slices.SortStableFunc(taken, func(a, b dueSlot) int { return cmp.Compare(a.sec, b.sec) })
	for _, t := range taken {
		out = append(out, t.sl)
	}
	return out, next
}

func (d *deadlines) len() int {
	n := 0
	for i := range d.stripes {
		w := &d.stripes[i]
		w.mu.Lock()
		n += w.n
		w.mu.Unlock()
	}
	return n
}

// all yields every deadline waiting, stripe by stripe (tests).
func (d *deadlines) all(yield func(deadline) bool) {
	for i := range d.stripes {
		w := &d.stripes[i]
		w.mu.Lock()
		for _, sl := range w.slots {
			for x := range sl.all {
				if !yield(x) {
					w.mu.Unlock()
					return
				}
			}
		}
		w.mu.Unlock()
	}
}

type secondHeap []int64

func (h secondHeap) Len() int           { return len(h) }
func (h secondHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h secondHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *secondHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *secondHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// armDeadlines registers what the bus must check later for t, after a
// change. The shard lock is held.
func (b *Bus) armDeadlines(k key, t *task, lat Lateness) {
	switch t.status {
	case apollo.StatusRunning:
		timeout := t.timeoutMs
		if timeout == 0 {
			timeout = lat.Timeout.Milliseconds()
		}
		// Counted from when the server learnt of the start, not from the
		// reported one: a reporter whose clock is behind, or a running
		// event sent late from a spool, must not time out at once (its
		// end may be the next event), and one whose clock is ahead (ts
		// goes up to the year 2200) must not put the deadline off. Every
		// run has a deadline, so this matters for every run.
		if timeout > 0 && t.startedAt > 0 {
			b.timers.push(t.shard, deadline{at: later(cmp.Or(t.updatedAt, t.startedAt), timeout), k: k, kind: dTimeout, seq: t.seq})
		}
	case apollo.StatusPending:
		if t.late {
			return
		}
		from := t.scheduledAt
		if from == 0 {
			from = t.updatedAt
		}
		b.timers.push(t.shard, deadline{at: later(from, lat.MissedAfter.Milliseconds()), k: k, kind: dMissedStart, seq: t.seq})
	}
}

// never is a deadline that does not come; slotOf rounds it up without
// overflow.
const never = math.MaxInt64 - 999

// later returns at+d (d >= 0), or never when the sum would overflow: ingest
// bounds timeoutMs and scheduledAt, but a log written before it did may hold
// int64 max, which wrapped into the past and timed the run out at once.
func later(at, d int64) int64 {
	if at > never-d {
		return never
	}
	return at + d
}

// deadlineLoop fires deadlines on the bus's clock until Stop.
func (b *Bus) deadlineLoop(ctx context.Context) error {
	timer := b.opts.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := b.timers.due(b.nowMs())
		for _, sl := range due {
			for d := range sl.all {
				if !b.waitRoom(ctx) {
					return nil // what did not fire is armed again by the restart's replay
				}
				b.fire(d)
			}
		}
		now := b.nowMs()
		wait := time.Hour
		if next > 0 {
			wait = time.Duration(next-now) * time.Millisecond
			if wait <= 0 {
				continue
			}
		}
		timer.Reset(wait)
		// The timer counts from the clock at Reset, the wait from now: a
		// clock that jumped in between (a test's fake clock) would leave
		// it late by the jump. Look again.
		if b.nowMs() != now {
			continue
		}
		select {
		case <-timer.C():
		case <-b.timers.wake:
			timer.Stop()
		case <-ctx.Done():
			return nil
		}
	}
}

func (b *Bus) fire(d deadline) {
	now := b.nowMs()
	switch d.kind {
	case dTimeout:
		if b.commitOwn(d.k,
			func(t *task) bool { return t.status == apollo.StatusRunning && t.seq == d.seq },
			func(t *task) apollo.Record {
				return apollo.Record{
					Event: apollo.Event{TaskID: d.k.id, Tenant: d.k.tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusTimeout, Ts: d.at},
					Kind:  apollo.KindTimeout, ReceivedAt: now,
				}
			}) {
			b.stats.timeouts.Add(1)
		}
	case dMissedStart:
		if b.commitOwn(d.k,
			func(t *task) bool { return t.status == apollo.StatusPending && t.seq == d.seq && !t.late },
			func(t *task) apollo.Record {
				return apollo.Record{
					Event: apollo.Event{TaskID: d.k.id, Tenant: d.k.tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusPending, Ts: d.at},
					Kind:  apollo.KindMissedStart, ReceivedAt: now,
				}
			}) {
			b.stats.missedStarts.Add(1)
		}
	case dParked:
		b.expireParked(d.k, now)
	}
}

// expireParked applies the out-of-order events of a task whose wait has
// ended (endWaits).
func (b *Bus) expireParked(k key, now int64) {
	b.pause.RLock()
	defer b.pause.RUnlock()
	if b.closed.Load() {
		return // what is still waiting is in the last snapshot or the log
	}
	s, h := b.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.get(h, k); t != nil {
		b.endWaits(s, k, t, now) // a log failure is logged in append
	}
}
