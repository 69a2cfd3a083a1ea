package main

import (
	"context"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/rules"
)

// The loop's side of the expectations: it takes what Apply queued (and
// what a tick finds) and acts on it (expect.go has the rest).

// take returns the findings Apply queued, and forgets them.
func (x *expectations) take() []expect.Event {
	x.mu.Lock()
	defer x.mu.Unlock()
	evs := x.found
	x.found = nil
	return evs
}

// testFindings, set by the tests' TestMain in the process they start,
// sees the findings as Apply queues them (acting false) and as the loop
// is about to act on them (acting true); it may hold the loop for good.
var testFindings func(evs []expect.Event, acting bool)

// act does what each finding calls for. The missed runs of one call are
// recorded together, under one fsync; a missed run recorded before (judged
// again after a restart) is not told again.
func (x *expectations) act(ctx context.Context, evs []expect.Event) {
	if testFindings != nil && len(evs) > 0 {
		testFindings(evs, true)
	}
	var (
		missed []bus.Missed
		at     []int // the index in evs of each missed run
	)
	for i, ev := range evs {
		if ev.Kind == expect.KindMissed {
			missed, at = append(missed, bus.Missed{Tenant: ev.Tenant, Job: ev.Job, Slot: ev.Slot, Detail: ev.Detail}), append(at, i)
		}
	}
	told := make([]bool, len(evs))
	if len(missed) > 0 {
		// Bounded by the loop's life (ctx ends at stopLoop), not by a
		// fixed time: the wait is for the log's fsync, which a loaded
		// machine makes slow, not wrong. Under a fixed 10 s a slow
		// fsync left the missed runs in the log without their
		// missed-start marks (shown pending, not late), with a warning
		// that they could not be recorded.
		fresh, err := x.bus.RecordMissed(ctx, missed)
		if err != nil {
			x.log.Warn("missed runs could not be recorded in the jobs' history", "runs", len(missed), "err", err)
		}
		refused := err != nil && x.bus.LogFailed()
		if refused {
			x.unrecorded.Store(true) // judged again by the next start (refused)
		}
		for k, i := range at {
			// Recorded before: told then. Refused: told by the next start.
			told[i] = refused || k < len(fresh) && !fresh[k]
		}
	}
	for i, ev := range evs {
		if told[i] {
			continue
		}
		switch ev.Kind {
		case expect.KindTooLong:
			// The run becomes timeout (unless it ended meanwhile), which
			// fires ON: timeout like any other; its end, told back to the
			// evaluator (Apply), ends its watch. One that is no longer
			// running is watched no more; one whose timeout the failed
			// log refused stays watched (refused).
			if !x.bus.TimeOut(ev.Tenant, ev.TaskID) && !x.refused(ev) {
				x.ev.Unwatch(ev.Tenant, ev.Job, ev.TaskID)
			}
			continue
		case expect.KindStable:
			x.log.Info("job stable again", "tenant", ev.Tenant, "job", ev.Job)
			continue
		}
		marked := false
		if marksRun(ev) {
			// Marked on the run, where it shows; the engines hear of the
			// mark from the log (the change log in the three-process mode,
			// marksFromFeed), so that one that was down or killed hears of
			// it after. The record kinds are named as the findings are.
			var kind apollo.Kind
			if err := kind.UnmarshalText([]byte(ev.Kind.String())); err == nil {
				marked = x.bus.Mark(ev.Tenant, ev.TaskID, kind, ev.Detail)
			}
			if !marked && x.refused(ev) {
				continue // pending, for the next start: told once marked
			}
			x.unpend(ev) // marked (Apply has seen to it), or it cannot be
		}
		x.log.Info("expectation not met", "kind", ev.Kind.String(), "tenant", ev.Tenant, "job", ev.Job, "detail", ev.Detail)
		o, ok := rules.ParseOccurrence(ev.Kind.String())
		// A flapping marked on its run reaches the engines from the log;
		// unmarked (no run to mark), it goes to occur, which takes
		// flapping alone (the other marks are the log's too).
		if ok && x.occur != nil && !(marked && ev.Kind == expect.KindFlapping) {
			x.occur(alert.Occurrence{Tenant: ev.Tenant, Job: ev.Job, Kind: o, Run: ev.TaskID, At: ev.Slot, Detail: ev.Detail})
		}
	}
}

// refused reports whether the bus refused ev's record (a timeout, a mark)
// because its log failed. Then the server stops (server.fatal), and no
// record is taken before it restarts: trying again here is in vain. The
// finding is kept instead, pending (a mark) or watched (a run too long),
// so that the snapshot of the stop keeps it and the next start acts on
// it, as it does on one found just before a kill -9 (the log after the
// snapshot it starts from gives it again otherwise). A missed run is
// kept by its time (unrecorded).
func (x *expectations) refused(ev expect.Event) bool {
	if !x.bus.LogFailed() {
		return false
	}
	x.log.Warn("the log failed and refused a finding's record; the next start acts on it",
		"kind", ev.Kind.String(), "tenant", ev.Tenant, "job", ev.Job, "task", ev.TaskID)
	return true
}

// marksRun reports whether ev is marked on its run (bus.Mark): a run too
// short or too often, the run that made its job flap.
func marksRun(ev expect.Event) bool {
	switch ev.Kind {
	case expect.KindTooShort, expect.KindTooOften:
		return true
	case expect.KindFlapping:
		return ev.TaskID != ""
	}
	return false
}
