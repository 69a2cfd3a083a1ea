package expect

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// A job watched for flapping (its spec's Flapping) keeps its latest
// outcomes and when they switched between success and failure; it flaps
// while the switches come closer together than the window says.

type flapState struct {
	// recent are the latest outcomes by the time their runs ended (1
	// success, -1 failure), then by their Seq, at most flapKeep of them:
	// the changes of different runs reach the evaluator in no set order,
	// and a run that ended earlier may be told after one that ended later.
	recent     []outcomeAt
	switches   timeRing // when the latest switches happened
	on         bool
	lastSwitch time.Time
	stable     *deadline
}

// outcomeAt is how a run ended (1 success, -1 failure), when (Unix ns),
// and its Run.Seq (0: none).
type outcomeAt struct {
	at  int64
	seq uint64
	o   int8
}

// before reports whether x ended before y: by their times, and, in the
// same millisecond, by their Seq when both have one (the server's order:
// Finished's times are milliseconds, and runs of different tasks are
// told in no set order, also in a replay). Without, the one told first
// counts first.
func (x outcomeAt) before(y outcomeAt) bool {
	return x.at < y.at || x.at == y.at && x.seq != 0 && y.seq != 0 && x.seq < y.seq
}

// flapKeep is how many outcomes a job watched for changes switches keeps:
// enough to count changes switches among runs that alternate, with room
// for runs that repeat an outcome in between.
func flapKeep(changes int) int { return 2*changes + 2 }

// remember puts o among the recent outcomes in the order they ended
// (outcomeAt.before) and keeps the latest keep of them. It reports
// whether o came late: an outcome that ended later was told before it.
func (f *flapState) remember(o outcomeAt, keep int) (late bool) {
	i := len(f.recent)
	for i > 0 && o.before(f.recent[i-1]) {
		i--
	}
	late = i < len(f.recent)
	f.recent = slices.Insert(f.recent, i, o)
	if extra := len(f.recent) - keep; extra > 0 {
		f.recent = slices.Delete(f.recent, 0, extra)
	}
	return late
}

// latest is the newest outcome alone (none when there is none yet).
func (f *flapState) latest() []outcomeAt {
	if n := len(f.recent); n > 0 {
		return []outcomeAt{f.recent[n-1]}
	}
	return nil
}

// flapStep counts a switch between success and failure, and starts or
// prolongs flapping. Outcomes count in the order their runs ended: one
// told late is put in its place and the switches are counted again over
// the recent outcomes. The flapping event names run, the run whose end
// made the job flap (the bus marks it).
func (ts *tenantState) flapStep(j *jobState, outcome int8, at time.Time, seq uint64, run string, out []Event) []Event {
	f, cfg := &j.flap, j.spec.Flapping
	prev := f.latest()
	if f.remember(outcomeAt{at: at.UnixNano(), seq: seq, o: outcome}, flapKeep(cfg.Changes)) {
		f.switches.reset()
		n := 0
		for i := 1; i < len(f.recent); i++ {
			if f.recent[i].o != f.recent[i-1].o {
				f.lastSwitch = time.Unix(0, f.recent[i].at)
				f.switches.push(f.lastSwitch)
				n++
			}
		}
		if n == 0 {
			return out
		}
		at = f.lastSwitch
	} else {
		if len(prev) == 0 || prev[0].o == outcome {
			return out
		}
		f.lastSwitch = at
		f.switches.push(at)
	}
	window := cmp.Or(cfg.Window, DefaultFlapWindow)
	hold := cmp.Or(cfg.Hold, window)
	switch {
	case f.on:
		ts.due.set(f.stable, at.Add(hold))
	case f.switches.within(at, window):
		f.on = true
		if f.stable == nil {
			f.stable = &deadline{kind: dStable, job: j, index: -1}
		}
		ts.due.set(f.stable, at.Add(hold))
		out = append(out, Event{Kind: KindFlapping, Tenant: j.tenant, Job: j.name, TaskID: run, Slot: at, At: at, Count: 1,
			Detail: fmt.Sprintf("%d switches between success and failure within %s", cfg.Changes, formatDuration(window))})
	}
	return out
}

// Flapping reports whether job is flapping now.
func (e *Evaluator) Flapping(tenant, job string) bool {
	ts, j := e.find(tenant, job)
	if ts == nil {
		return false
	}
	defer ts.mu.Unlock()
	return j != nil && j.flap.on
}
