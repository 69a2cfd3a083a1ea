package sched

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	lr := liveRun{task: t.id, savedRun: savedRun{Job: r.js.name, Attempt: attempt, Seq: t.seq + 2, Owner: s.owner}}
	if p != nil {
		lr.Started = true
		lr.Group, lr.Leader = p.group()
	}
	s.mu.Lock()
	s.live[r] = lr
	s.mu.Unlock()
	s.saveState()
}

// untrack forgets r once its last event is delivered: sent is not enough,
// since the reporter holds an event in memory until the server has it (a
// batch waits up to its flush interval, a request may hang), and a kill -9
// then would lose the run's end with nothing left to settle it. With a
// reporter that can say when its events are delivered (the agent client's
// Flush), the run leaves the state file in a save of its own once they
// are; a reporter that cannot say leaves it at once, as before.
//
// That save is not left to the next one the loop makes anyway: that may
// be a day away (the next tick of a daily job), and a kill -9 before it
// had the next start settle a run that had ended and been delivered:
// logged as lost, and shown by the job list as failed while the server
// had its success (TestADeliveredRunIsNotSettledAfterKill). Runs that end
// together share the save, as they share the Flush.
func (s *Scheduler) untrack(r *run) {
	if s.state == nil {
		return
	}
	f, ok := s.rep.to.(flusher)
	if !ok {
		s.mu.Lock()
		delete(s.live, r)
		s.mu.Unlock()
		s.saveState()
		return
	}
	s.mu.Lock()
	s.delivering = append(s.delivering, r)
	s.mu.Unlock()
	s.awaitDeliveries(f)
}

// retire hands the task r was on to untrack when an attempt failed and a
// retry takes r's place in the state file (track): the failed attempt's
// task stays there, under a stand-in, until its end is delivered. Before,
// the retry replaced it at once, and a kill -9 while that end was still
// on its way left the attempt running on the server for ever, settled by
// no one (TestSchedKilledBeforeAFailedAttemptIsDelivered).
func (s *Scheduler) retire(r *run) {
	if s.state == nil {
		return
	}
	s.mu.Lock()
	lr, ok := s.live[r]
	stand := &run{js: r.js}
	if ok {
		s.live[stand] = lr
	}
	s.mu.Unlock()
	if ok {
		s.untrack(stand)
	}
}

// awaitDeliveries starts awaitDelivery for the runs in delivering, unless
// it runs already (it then takes them too).
func (s *Scheduler) awaitDeliveries(f flusher) {
	s.mu.Lock()
	start := !s.awaiting
	s.awaiting = true
	s.mu.Unlock()
	if start {
		s.flushes.Add(1)
		go s.awaitDelivery(f)
	}
}

// awaitDelivery waits for the reporter to deliver the ended runs' events,
// then forgets those runs and saves the state file. The runs that end
// meanwhile wait for the next Flush together: however slow the server, a
// job due every second costs one waiting goroutine, not one more each
// second. It ends when no run waits, or when Stop begins (forgetEnded
// takes over).
func (s *Scheduler) awaitDelivery(f flusher) {
	defer s.flushes.Done()
	for {
		s.mu.Lock()
		batch := s.delivering
		s.delivering = nil
		if len(batch) == 0 {
			s.awaiting = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		// Every run of batch sent its last event before it was added, so
		// this Flush covers them all.
		err := f.Flush(s.stopCtx)
		s.mu.Lock()
		if err != nil {
			// Stop began: the runs stay in the file until forgetEnded
			// sees their events delivered.
			s.delivering, s.awaiting = nil, false
			s.mu.Unlock()
			return
		}
		for _, r := range batch {
			delete(s.live, r)
		}
		s.mu.Unlock()
		s.saveState()
	}
}

// flusher is a Reporter that can wait until what it was sent is delivered.
type flusher interface {
	Flush(ctx context.Context) error
}

// stopFlush bounds the wait at Stop for the last runs' events to be
// delivered (or spooled), so that their runs leave the state file and the
// next start does not settle them again.
const stopFlush = 5 * time.Second

// forgetEnded is the end of Stop: every run has ended; once the reporter
// has delivered their events they leave the state file, which is saved.
func (s *Scheduler) forgetEnded() {
	if s.state == nil {
		return
	}
	if f, ok := s.rep.to.(flusher); ok {
		ctx, cancel := context.WithTimeout(context.Background(), stopFlush)
		err := f.Flush(ctx)
		cancel()
		s.flushes.Wait()
		if err != nil {
			s.log.Warn("sched: the last runs' events were not delivered at stop; the next start settles their runs", "err", err)
			s.saveState()
			return
		}
	}
	s.mu.Lock()
	clear(s.live)
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
//
// Each settled run stays in the state file until its event is delivered,
// as a run that ends does (untrack): it returns whether some wait for
// that (awaitDeliveries). A run gone from the file at once was lost for
// good by a second kill in the moments after the start, its event still
// in the reporter's memory (TestSettledRunStaysUntilDelivered).
//
// A run that another Owner reported is not settled (keepOthersLocked).
func (s *Scheduler) settleLostLocked(runs map[string]savedRun) (waiting bool) {
	_, deliveredKnown := s.rep.to.(flusher)
	others := map[string]savedRun{}
	for id, sr := range runs {
		if sr.Owner != "" && sr.Owner != s.owner {
			others[id] = sr
			continue
		}
		js := s.jobs[sr.Job]
		if js == nil {
			js = &jobState{name: sr.Job} // removed from the file since
		}
		t := &task{id: id, js: js, seq: max(sr.Seq-1, 0)}
		if s.state != nil && deliveredKnown {
			r := &run{js: js} // stands for the lost run in live until delivered
			s.live[r] = liveRun{task: id, savedRun: sr}
			s.delivering = append(s.delivering, r)
			waiting = true
		}
		if !sr.Started {
			s.emitLocked(t, s.skipEvent(t, "scheduler stopped"))
			continue
		}
		killed := sr.Killed || sr.Group > 0 && killLostGroup(sr.Group, sr.Leader)
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
	s.keepOthersLocked(others)
	return waiting
}

// keepOthersLocked keeps in the state file the lost runs that a scheduler
// with another Owner reported (apollo sched started with another token):
// reported with this one, their events would go to this token's tenant,
// which may be another than theirs, and leave theirs running for ever.
// They wait for a start with their Owner, which settles them; the log
// says so at every start until then. What is left of their processes is
// killed all the same: it runs on this host, beside this scheduler's
// runs, whoever reports them. s.mu is held.
func (s *Scheduler) keepOthersLocked(others map[string]savedRun) {
	s.others = others
	if len(others) == 0 {
		return
	}
	ids := make([]string, 0, len(others))
	for id, sr := range others {
		if sr.Started && !sr.Killed && sr.Group > 0 && killLostGroup(sr.Group, sr.Leader) {
			sr.Killed = true
		}
		sr.Group, sr.Leader = 0, ""
		others[id] = sr
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.log.Error("sched: runs the last scheduler lost were reported with another token than this one's, "+
		"maybe another tenant's: they are not reported with this one, and stay running on the server. "+
		"Start apollo sched once with the token they were reported with, on this state directory, to settle them; "+
		"if that token is gone, mark each failed by hand (apollo task fix TASK --status failed --reason ..., with a token of their tenant), "+
		"then, with apollo sched stopped, drop them from the state file (apollo sched lost --state DIR --drop TASK)",
		"runs", len(ids), "tasks", ids, "state", s.state.path())
}
