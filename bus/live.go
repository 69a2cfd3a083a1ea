package bus

import (
	"context"
	"math"

	"github.com/apollo-11/apollo"
	"sync"
	"sync/atomic"
)

// liveMark keeps how far the live observers (Options.Live) have heard: the
// mark, the highest LSN such that every change made by a record at or
// below it has been handed to them (their Apply returned). An observer
// that saves what it acted on saves the mark with it (LiveWatermark); after
// a crash the replay hands it the changes above the mark again
// (ReplayLiveAfter): a change accepted just before a kill -9 still
// reaches the event rules.
//
// Workers deliver changes task by task, out of LSN order, so the mark
// moves in epochs. Every queued change counts in below (its LSN is at most
// bound) or in above; once below is empty, every change up to bound was
// delivered and the mark is bound. A new epoch starts only while the bus
// is paused (no record between its append and its queueing): bound
// becomes the highest LSN appended, what counted above counts below, and
// every change queued afterwards has a higher LSN than bound.
type liveMark struct {
	on   bool   // the bus logs and has live observers; otherwise nothing is counted
	from uint64 // replay: changes above it go to the live observers too

	mu    sync.Mutex // held to move changes out of the counts, and to start an epoch
	bound uint64     // written with mu and the bus's pause held
	below atomic.Int64
	above atomic.Int64
	mark  atomic.Uint64
	moved chan struct{} // closed when the mark moves (Settle); with mu
}

// setMark moves the mark to lsn and wakes whoever waits for it to move
// (Settle); l.mu is held.
func (l *liveMark) setMark(lsn uint64) {
	if l.mark.Swap(lsn) != lsn && l.moved != nil {
		close(l.moved)
		l.moved = nil
	}
}

// movedChan returns a channel closed when the mark next moves.
func (l *liveMark) movedChan() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moved == nil {
		l.moved = make(chan struct{})
	}
	return l.moved
}

// start sets the mark at lsn, the last record replayed: the live observers
// heard of everything before it, or were handed it in the replay.
func (l *liveMark) start(lsn uint64) {
	l.bound = lsn
	l.mark.Store(lsn)
}

// queued counts a change about to be queued; the bus's pause is held for
// reading.
func (l *liveMark) queued(lsn uint64) {
	if lsn <= l.bound {
		l.below.Add(1)
	} else {
		l.above.Add(1)
	}
}

// delivered counts out changes every live observer has been handed.
func (l *liveMark) delivered(batch []*apollo.Change) {
	l.mu.Lock()
	var below int64
	for _, c := range batch {
		if c.LSN <= l.bound {
			below++
		}
	}
	l.above.Add(below - int64(len(batch)))
	if l.below.Add(-below) == 0 {
		l.setMark(l.bound)
	}
	l.mu.Unlock()
}

// next starts an epoch at lsn, the highest LSN appended, if the last one
// is over; the bus's pause is held for writing.
func (l *liveMark) next(lsn uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.below.Load() != 0 || lsn <= l.bound {
		return
	}
	l.bound = lsn
	l.below.Store(l.above.Swap(0))
	if l.below.Load() == 0 {
		l.setMark(lsn)
	}
}

// LiveWatermark returns the highest LSN such that every change made by a
// record at or below it has reached the live observers (Options.Live):
// what an observer that saves what it acted on saves with it, read before
// it copies its state, and hands to ReplayLiveAfter on its next start. 0
// when the bus keeps no log or has no live observers. The mark moves in
// steps: a call may start a new one, which pauses the bus as long as it
// takes the records being decided to be queued.
func (b *Bus) LiveWatermark() uint64 {
	l := &b.live
	if !l.on {
		return 0
	}
	l.mu.Lock()
	over := l.below.Load() == 0 && l.bound < b.lsn.Load()
	l.mu.Unlock()
	if over {
		b.pause.Lock()
		l.next(b.lsn.Load())
		b.pause.Unlock()
	}
	return l.mark.Load()
}

// Settle returns once every change decided before the call has been
// handed to the observers (Options.Observers and Live), or with ctx's
// error: what an answer built from the observers' state (the learner's
// proposals) waits for, so that a reader sees the events the bus
// accepted before it asked. It follows the live mark when the bus keeps
// one (a busy bus does not hold it back: later changes do not extend the
// wait), and waits for the delivery queue to drain otherwise.
func (b *Bus) Settle(ctx context.Context) error {
	l := &b.live
	if !l.on {
		return b.WaitDrained(ctx)
	}
	want := b.lsn.Load()
	for {
		moved := l.movedChan()
		if b.LiveWatermark() >= want {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ReplayLiveAfter makes the replay (Replay, NewReplayer) hand the changes
// of records above lsn to the live observers as well as to the others:
// those they had not heard of when the process stopped. Call it before
// the replay; without it they hear of none of the replayed changes.
func (b *Bus) ReplayLiveAfter(lsn uint64) { b.live.from = lsn }

// replaysLive reports whether the replay hands anything to the live observers.
func (l *liveMark) replaysLive() bool { return l.from != math.MaxUint64 }
