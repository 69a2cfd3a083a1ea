package bus

import (
	"container/heap"
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

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

type deadlines struct {
	mu   sync.Mutex
	h    deadlineHeap
	wake chan struct{}
}

func newDeadlines() *deadlines { return &deadlines{wake: make(chan struct{}, 1)} }

func (d *deadlines) push(x deadline) {
	d.mu.Lock()
	heap.Push(&d.h, x)
	first := d.h[0].at == x.at
	d.mu.Unlock()
	if first {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// due pops every deadline at or before now; next is the earliest left (0 if none).
func (d *deadlines) due(now int64) (out []deadline, next int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.h) > 0 && d.h[0].at <= now {
		out = append(out, heap.Pop(&d.h).(deadline))
	}
	if len(d.h) > 0 {
		next = d.h[0].at
	}
	return out, next
}

func (d *deadlines) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.h)
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
		if timeout > 0 && t.startedAt > 0 {
			b.timers.push(deadline{at: t.startedAt + timeout, k: k, kind: dTimeout, seq: t.seq})
		}
	case apollo.StatusPending:
		if t.late {
			return
		}
		from := t.scheduledAt
		if from == 0 {
			from = t.updatedAt
		}
		b.timers.push(deadline{at: from + lat.MissedAfter.Milliseconds(), k: k, kind: dMissedStart, seq: t.seq})
	}
}

// deadlineLoop fires deadlines on the bus's clock until Stop.
func (b *Bus) deadlineLoop() {
	defer b.wg.Done()
	timer := b.opts.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := b.timers.due(b.nowMs())
		for _, d := range due {
			b.fire(d)
		}
		wait := time.Hour
		if next > 0 {
			wait = time.Duration(next-b.nowMs()) * time.Millisecond
			if wait <= 0 {
				continue
			}
		}
		timer.Reset(wait)
		select {
		case <-timer.C():
		case <-b.timers.wake:
			timer.Stop()
		case <-b.stop:
			return
		}
	}
}

func (b *Bus) fire(d deadline) {
	now := b.nowMs()
	switch d.kind {
	case dTimeout:
		b.commitOwn(d.k,
			func(t *task) bool { return t.status == apollo.StatusRunning && t.seq == d.seq },
			func(t *task) apollo.Record {
				b.stats.timeouts.Add(1)
				return apollo.Record{
					Event: apollo.Event{TaskID: d.k.id, Tenant: d.k.tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusTimeout, Ts: d.at},
					Kind:  apollo.KindTimeout, ReceivedAt: now,
				}
			})
	case dMissedStart:
		b.commitOwn(d.k,
			func(t *task) bool { return t.status == apollo.StatusPending && t.seq == d.seq && !t.late },
			func(t *task) apollo.Record {
				b.stats.missedStarts.Add(1)
				return apollo.Record{
					Event: apollo.Event{TaskID: d.k.id, Tenant: d.k.tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusPending, Ts: d.at},
					Kind:  apollo.KindMissedStart, ReceivedAt: now,
				}
			})
	case dParked:
		b.expireParked(d.k, now)
	}
}

// expireParked drops out-of-order events that waited too long.
func (b *Bus) expireParked(k key, now int64) {
	b.pause.RLock()
	defer b.pause.RUnlock()
	s := b.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[k]; t != nil {
		b.unpark(s, k, t, now)
	}
}
