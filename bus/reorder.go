package bus

import (
	"fmt"
	"slices"

	"github.com/apollo-11/apollo"
)

// Out-of-order events (docs/protocol.md, "Sequence numbers"). An event
// that skips ahead of a missing sequence and is not legal yet, but could
// become legal, waits in its task's parked list and is answered Waiting.
// It leaves the list in one of three ways:
//
//   - the missing events arrive and make it legal: it applies then;
//   - an event that arrives makes it illegal for good (the run ended): it
//     is dropped, counted as illegal;
//   - the reorder window ends first: the bus applies it anyway, as a
//     record of kind gap that says how many earlier events never arrived.
//     The run thus converges to what its reporter said last.
//
// The third way is a decision of the bus's own, so it is logged like a
// timeout: replay never judges a wait by the time, it applies the gap
// records where the live run logged them. The first two happen after a
// record is applied (unpark), in replay exactly as live.

const maxParkedPerTask = 16

// park keeps r until the events before it arrive, in sequence order.
func (b *Bus) park(t *task, r *apollo.Record) {
	until := r.ReceivedAt + b.opts.ReorderWindow.Milliseconds()
	w := t.waiting()
	i := len(w)
	for i > 0 && w[i-1].rec.Sequence > r.Sequence {
		i--
	}
	if i > 0 && w[i-1].rec.Sequence == r.Sequence {
		return // the same event twice while waiting (an old log): one copy is enough
	}
	sd := b.shards[t.shard].sideOf(t)
	sd.parked = slices.Insert(sd.parked, i, parkedEvent{rec: *r, until: until})
	b.parked.Add(1)
	b.timers.push(t.shard, deadline{at: until, k: key{tenant: r.Tenant, id: r.TaskID}, kind: dParked})
}

// waits reports whether an event with sequence seq already waits for t.
func (t *task) waits(seq int64) bool {
	if t == nil {
		return false
	}
	return slices.ContainsFunc(t.waiting(), func(p parkedEvent) bool { return p.rec.Sequence == seq })
}

// take removes the waiting event with sequence seq and returns it.
func (b *Bus) take(t *task, seq int64) (apollo.Record, bool) {
	w := t.waiting()
	for i := range w {
		if w[i].rec.Sequence == seq {
			r := w[i].rec
			t.side.parked = slices.Delete(w, i, i+1)
			b.parked.Add(-1)
			return r, true
		}
	}
	return apollo.Record{}, false
}

// unpark applies the waiting events that the last change made legal and
// drops those it made illegal for good. It never looks at the time: that
// is endWaits', and it logs what it decides.
func (b *Bus) unpark(s *shard, k key, t *task) {
	defer s.giveBack(t)
	for len(t.waiting()) > 0 {
		p := &t.side.parked[0]
		switch {
		case p.rec.Sequence <= t.seq:
			b.stats.duplicate.Add(1)
		case apollo.CanTransition(t.status, p.rec.Status):
			r := p.rec
			b.applyLocked(s, k, t, &r, nil)
			b.stats.accepted.Add(1)
		case p.rec.Sequence == t.seq+1 || !apollo.CanReach(t.status, p.rec.Status):
			b.stats.illegal.Add(1)
			b.logDropped(&p.rec, t.status)
		default:
			return // still waiting for an earlier event
		}
		t.side.parked = slices.Delete(t.side.parked, 0, 1)
		b.parked.Add(-1)
	}
}

func (b *Bus) logDropped(r *apollo.Record, from apollo.Status) {
	if ok, n := b.warn.Allow("", b.opts.Clock.Now()); ok {
		b.log.Warn("waiting event dropped: an event that arrived made it illegal", "tenant", r.Tenant, "task", r.TaskID,
			"sequence", r.Sequence, "transition", from.String()+" -> "+r.Status.String(), "suppressed", n)
	}
}

// endWaits applies, as gap records, the waiting events of t whose reorder
// window ended at or before now, oldest first, each followed by whatever it
// makes legal. Each gap record is logged before it applies, like any
// decision of the bus's own; an error means the log refused it. The shard
// lock is held; never called in replay, where the gap records come from
// the log.
func (b *Bus) endWaits(s *shard, k key, t *task, now int64) error {
	for w := t.waiting(); len(w) > 0 && w[0].until <= now; w = t.waiting() {
		r := gapRecord(&w[0].rec, t.seq, now)
		s.lsn = 0
		if b.opts.Log != nil {
			lsn, err := b.append(&r, nil)
			if err != nil {
				return err
			}
			s.lsn = lsn
		}
		b.applyGap(s, k, t, &r)
	}
	return nil
}

// applyGap applies a gap record in place of the waiting event it names.
// Every waiting event is reachable from the task's state (unpark drops the
// others), so the run moves to what its reporter said.
func (b *Bus) applyGap(s *shard, k key, t *task, r *apollo.Record) {
	b.take(t, r.Sequence)
	b.applyLocked(s, k, t, r, nil)
	b.stats.accepted.Add(1)
	b.stats.waitEnded.Add(1)
	b.unpark(s, k, t)
}

// gapRecord is the record that applies waiting event p once its wait has
// ended: the event as reported, stamped with the time the bus decided, and
// how many events before it never came (the task's last sequence is last).
func gapRecord(p *apollo.Record, last, now int64) apollo.Record {
	r := *p
	r.Kind, r.ReceivedAt = apollo.KindGap, now
	switch missing := p.Sequence - last - 1; missing {
	case 1:
		r.Reason = "1 earlier event never arrived"
	default:
		r.Reason = fmt.Sprintf("%d earlier events never arrived", missing)
	}
	return r
}
