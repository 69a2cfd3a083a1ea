package sched

import (
	"context"
	"time"
)

// flow is one trigger (a scheduled tick, or a manual trigger) and every job
// it reaches: the roots it started and, transitively, the jobs that run
// after them. A downstream job runs once all of its upstreams that belong
// to the same flow have succeeded; upstreams outside the flow do not count.
// A flow keeps the job graph it started with, so a reload does not reshape
// a flow in progress.
type flow struct {
	key     string // the trigger part of every task ID in the flow
	at      time.Time
	set     *jobSet
	members map[string]bool
	started map[string]bool
	// outcome of each finished member: "" for success, otherwise the reason
	// its downstream runs are skipped ("upstream extract failed").
	outcome map[string]string
}

// newFlowLocked returns the flow of key, creating it, with roots and their
// downstream jobs as members.
func (s *Scheduler) newFlowLocked(key string, at time.Time, roots []string) *flow {
	fl := s.flows[key]
	if fl == nil {
		fl = &flow{key: key, at: at, set: s.set, members: map[string]bool{}, started: map[string]bool{}, outcome: map[string]string{}}
		s.flows[key] = fl
	}
	var add func(name string)
	add = func(name string) {
		if fl.members[name] {
			return
		}
		fl.members[name] = true
		if j := fl.set.byName[name]; j != nil {
			for _, d := range j.below {
				add(d)
			}
		}
	}
	for _, r := range roots {
		add(r)
	}
	return fl
}

// ready reports whether every upstream of name in the flow has finished,
// and the first reason to skip it, if any upstream did not succeed.
func (fl *flow) ready(name string) (skip string, ok bool) {
	for _, up := range fl.set.byName[name].after {
		if !fl.members[up] {
			continue
		}
		oc, done := fl.outcome[up]
		if !done {
			return "", false
		}
		if skip == "" {
			skip = oc
		}
	}
	return skip, true
}

// startLocked starts a run of name in fl, unless the scheduler is stopping,
// the job is paused (a manual trigger runs a paused job all the same) or
// its concurrency policy says no; then it reports the run skipped. It
// returns the run's task ID, and the run when one started.
func (s *Scheduler) startLocked(fl *flow, name string, due time.Time, manual bool) (string, *run) {
	fl.started[name] = true
	t := &task{id: taskID(name, fl.key, 1), js: s.jobs[name]}
	own := "upstream " + name + " skipped"
	switch js := t.js; {
	case js == nil: // removed by a reload while its flow was going
		t.js = &jobState{name: name}
		s.skipLocked(fl, t, "job removed from the jobs file", own)
	case s.stopping:
		s.skipLocked(fl, t, "scheduler stopped", own)
	case js.paused && !manual:
		s.skipLocked(fl, t, "job paused", own)
	case js.j.policy == ConcurrencyForbid && len(js.active) > 0:
		s.skipLocked(fl, t, "previous run still running", own)
	default:
		var olds []*run
		if js.j.policy == ConcurrencyReplace {
			for o := range js.active {
				o.cancel(errReplaced)
				olds = append(olds, o)
			}
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		r := &run{js: js, j: js.j, fl: fl, dueAt: due, ctx: ctx, cancel: cancel, doneC: make(chan struct{}), tracked: make(chan struct{})}
		js.active[r] = struct{}{}
		s.active[r] = struct{}{}
		s.runs.Add(1)
		go s.execute(r, t, olds)
		return t.id, r
	}
	return t.id, nil
}

// skipLocked reports t as manual_blocked with {"skipped": reason} and
// finishes its job in the flow with outcome, which its downstream inherit.
func (s *Scheduler) skipLocked(fl *flow, t *task, reason, outcome string) {
	s.emitLocked(t, s.skipEvent(t, reason))
	s.finishLocked(fl, t.js.name, outcome)
}

// finishLocked records how name ended in fl, and starts or skips the
// downstream jobs that were waiting only for it.
func (s *Scheduler) finishLocked(fl *flow, name, outcome string) {
	fl.outcome[name] = outcome
	if j := fl.set.byName[name]; j != nil {
		for _, d := range j.below {
			if !fl.members[d] || fl.started[d] {
				continue
			}
			skip, ok := fl.ready(d)
			switch {
			case !ok:
			case skip != "":
				fl.started[d] = true
				t := &task{id: taskID(d, fl.key, 1), js: s.jobs[d]}
				if t.js == nil {
					t.js = &jobState{name: d}
				}
				s.skipLocked(fl, t, skip, skip)
			default:
				s.startLocked(fl, d, s.clock.Now(), false)
			}
		}
	}
	if len(fl.outcome) == len(fl.members) && s.flows[fl.key] == fl {
		delete(s.flows, fl.key)
	}
}
