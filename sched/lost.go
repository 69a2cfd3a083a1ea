package sched

import (
	"fmt"

	apollo "github.com/apollo-11/apollo"
)

// A scheduler that dies without stopping (kill -9, a crash, a power cut)
// leaves its runs in progress: on the server their tasks would stay
// running (or pending) for ever unless the job has a timeout, and their
// processes, in groups of their own, would run on beside the runs of the
// next scheduler. So every task in progress is in the state file, and the
// next Start settles it.

// liveRun is a task in progress as the state file keeps it.
type liveRun struct {
	task string
	savedRun
}

// track records t, the task r is on, in the state file before its next
// event is sent: its last event will take the sequence after that one. p
// is its process once started. A failure to save is logged and the run
// goes on.
func (s *Scheduler) track(r *run, t *task, attempt int, p proc) {
	if s.state == nil {
		return
	}
	lr := liveRun{task: t.id, savedRun: savedRun{Job: r.js.name, Attempt: attempt, Seq: t.seq + 2}}
	if p != nil {
		lr.Started = true
		lr.Group, lr.Leader = p.group()
	}
	s.mu.Lock()
	s.live[r] = lr
	s.mu.Unlock()
	s.saveState()
}

// untrack forgets r once its last event is sent.
func (s *Scheduler) untrack(r *run) {
	if s.state == nil {
		return
	}
	s.mu.Lock()
	delete(s.live, r)
	s.mu.Unlock()
	s.saveState()
}

// lostError is what a settled run's extra says happened.
const lostError = "the scheduler stopped without stopping this run (killed, crashed, or the host went down); how it ended is unknown"

// settleLostLocked reports the tasks that the last scheduler left in
// progress: failed with {"lost": true} if their process had started (after
// killing what is left of its group), skipped as "scheduler stopped"
// otherwise. Each event takes the sequence of the task's last event, so
// one that the last scheduler did send makes it a duplicate the server
// ignores. Lost runs are not retried, and the jobs after them in their
// chain do not run. s.mu is held.
func (s *Scheduler) settleLostLocked(runs map[string]savedRun) {
	for id, sr := range runs {
		js := s.jobs[sr.Job]
		if js == nil {
			js = &jobState{name: sr.Job} // removed from the file since
		}
		t := &task{id: id, js: js, seq: max(sr.Seq-1, 0)}
		if !sr.Started {
			s.emitLocked(t, s.skipEvent(t, "scheduler stopped"))
			continue
		}
		killed := sr.Group > 0 && killLostGroup(sr.Group, sr.Leader)
		fields := map[string]any{"attempt": sr.Attempt, "exitCode": -1, "lost": true, "error": lostError}
		if killed {
			fields["killed"] = true
		}
		ev := t.event(apollo.StatusFailed, s.clock.Now())
		ev.Extra = encodeExtra(fields, "", "")
		s.log.Warn("sched: a run the last scheduler lost is reported failed", "task", id,
			"leftovers", fmt.Sprintf("process group %d killed: %v", sr.Group, killed))
		s.emitLocked(t, ev)
	}
}
