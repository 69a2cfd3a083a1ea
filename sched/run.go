package sched

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// Why a run was cut short; the cause of its context.
var (
	errTimeout  = errors.New("timeout")
	errReplaced = errors.New("replaced by a newer run")
	errShutdown = errors.New("scheduler shutdown")
)

// run is one run of a job in a flow: its first attempt and its retries.
type run struct {
	js     *jobState
	j      *job // the settings the run started with
	fl     *flow
	dueAt  time.Time
	ctx    context.Context // cancelled with errReplaced or errShutdown
	cancel context.CancelCauseFunc
	doneC  chan struct{} // closed when the run is reported and over
	// tracked is closed once the run is in the state file: from then on a
	// scheduler killed before the run ends settles it at its next start.
	tracked chan struct{}
}

// ending is how one attempt ended, as far as retries are concerned.
type ending int

const (
	endSuccess ending = iota
	endFailed         // failed or timed out: retried while retries last
	endCut            // replaced or killed at shutdown: not retried
	endSkipped        // never started: the scheduler is stopping
)

// execute runs r to its end and hands the outcome to its flow. The run
// leaves the job's active set before its last event is sent, so that whoever
// sees that event (say, a success in the dashboard) and triggers the job
// again is not told that it is still running.
func (s *Scheduler) execute(r *run, t *task, olds []*run) {
	defer s.runs.Done()
	outcome, t, last := s.attempts(r, t, olds)
	s.mu.Lock()
	delete(r.js.active, r)
	delete(s.active, r)
	s.mu.Unlock()
	s.emit(t, last)
	s.untrack(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	close(r.doneC) // after the last event: a replacing run starts only now
	r.cancel(nil)
	s.finishLocked(r.fl, r.js.name, outcome)
}

// attempts runs the first attempt and the retries. It returns the outcome
// for the flow ("" for success), and the last task with its final event,
// which is not sent yet.
func (s *Scheduler) attempts(r *run, t *task, olds []*run) (string, *task, apollo.Event) {
	failed, skipped := "upstream "+r.js.name+" failed", "upstream "+r.js.name+" skipped"
	s.track(r, t, 1, nil)
	close(r.tracked)
	s.emitPending(r, t, r.dueAt, 1)
	for _, o := range olds {
		<-o.doneC // replace: the old run was cancelled; it ends, then this one starts
	}
	for attempt := 1; ; attempt++ {
		end, ev := s.attempt(r, t, attempt)
		switch {
		case end == endSuccess:
			return "", t, ev
		case end == endSkipped:
			return skipped, t, ev
		case end == endCut, attempt > r.j.retries:
			return failed, t, ev
		}
		s.emit(t, ev)
		s.retire(r)
		wait := retryBackoff(r.j.backoff, attempt)
		t = &task{id: taskID(r.js.name, r.fl.key, attempt+1), js: r.js}
		s.track(r, t, attempt+1, nil)
		s.emitPending(r, t, s.clock.Now().Add(wait), attempt+1)
		if !s.sleep(r, wait) {
			if errors.Is(context.Cause(r.ctx), errReplaced) {
				return failed, t, s.endEvent(t, apollo.StatusFailed, map[string]any{"attempt": attempt + 1, "replaced": true}, procResult{}, 0)
			}
			return skipped, t, s.skipEvent(t, "scheduler stopped")
		}
	}
}

// retryBackoff is the wait before retry n (n = 1 for the first retry):
// base doubled n-1 times, at most an hour, or base when it is longer. The
// jobs file accepts a retry_backoff up to maxSpan, and each retry waits
// at least that long: before, every wait was cut to an hour, so a
// retry_backoff of 3h retried after 1h
// (TestRetryBackoffOverAnHourIsHonoured).
func retryBackoff(base time.Duration, n int) time.Duration {
	ceiling := max(base, maxRetryBackoff)
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// sleep waits d on the clock; false if the run was cut or the scheduler
// began stopping meanwhile (a retry is a new run: none start during Stop).
func (s *Scheduler) sleep(r *run, d time.Duration) bool {
	select {
	case <-r.ctx.Done():
		return false
	case <-s.stopC:
		return false
	default:
	}
	if d <= 0 {
		return true
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-r.ctx.Done():
	case <-s.stopC:
	}
	return false
}

// attempt runs one attempt of r as task t. It returns how the attempt
// ended and its final event, which the caller sends.
func (s *Scheduler) attempt(r *run, t *task, attempt int) (ending, apollo.Event) {
	if cause := context.Cause(r.ctx); errors.Is(cause, errReplaced) {
		return endCut, s.endEvent(t, apollo.StatusFailed, map[string]any{"attempt": attempt, "replaced": true}, procResult{}, 0)
	}
	if s.isStopping() {
		return endSkipped, s.skipEvent(t, "scheduler stopped")
	}
	spec := &runSpec{argv: r.j.argv, dir: r.j.dir, env: append(r.j.env[:len(r.j.env):len(r.j.env)],
		"APOLLO_TASK_ID="+t.id,
		"APOLLO_JOB_NAME="+r.js.name,
		"APOLLO_SCHEDULED_AT="+r.fl.at.UTC().Format(time.RFC3339),
		"APOLLO_ATTEMPT="+strconv.Itoa(attempt),
	)}
	s.nRuns.Add(1)
	p, err := s.runner.start(spec)
	if err != nil {
		return endFailed, s.endEvent(t, apollo.StatusFailed, map[string]any{"attempt": attempt, "exitCode": -1, "error": err.Error()}, procResult{}, 0)
	}
	s.track(r, t, attempt, p)
	startedAt := s.clock.Now()
	ev := t.event(apollo.StatusRunning, startedAt)
	ev.TimeoutMs = timeoutMs(r.j)
	s.emit(t, ev)

	var deadline <-chan time.Time
	if r.j.timeout > 0 {
		tm := s.clock.NewTimer(r.j.timeout)
		defer tm.Stop()
		deadline = tm.C()
	}
	var why error
	select {
	case <-p.done():
	case <-deadline:
		if p.exited() {
			// It ended in time; its output is still read, while a daemon
			// it started holds it open (drainGrace): not a timeout.
			<-p.done()
			break
		}
		why = errTimeout
		s.terminate(p, r.j.killGrace)
	case <-r.ctx.Done():
		why = context.Cause(r.ctx)
		s.terminate(p, r.j.killGrace)
	}
	res := p.result()
	fields := map[string]any{"attempt": attempt}
	status := apollo.StatusFailed
	switch {
	case why == nil && res.exitCode == 0 && !res.signaled:
		status = apollo.StatusSuccess
		fields["exitCode"] = 0
	case why == nil:
		fields["exitCode"] = res.exitCode
		if res.signaled {
			fields["signaled"] = true
		}
	case errors.Is(why, errReplaced):
		fields["replaced"], fields["killed"] = true, true
	default: // the timeout, or the shutdown deadline
		status = apollo.StatusTimeout
		fields["killed"] = true
		if errors.Is(why, errShutdown) {
			fields["shutdown"] = true
		}
	}
	ev = s.endEvent(t, status, fields, res, res.ended.Sub(startedAt))
	switch {
	case status == apollo.StatusSuccess:
		return endSuccess, ev
	case why != nil && !errors.Is(why, errTimeout):
		return endCut, ev
	}
	return endFailed, ev
}

// terminate asks the attempt's process group to stop (SIGTERM), and kills
// it (SIGKILL) if it is still there after grace.
func (s *Scheduler) terminate(p proc, grace time.Duration) {
	_ = p.signal(syscall.SIGTERM)
	if grace > 0 {
		tm := s.clock.NewTimer(grace)
		defer tm.Stop()
		select {
		case <-p.done():
			return
		case <-tm.C():
		}
	}
	_ = p.signal(syscall.SIGKILL)
	<-p.done()
}

// ReportSlack is how long after a run's timeout plus kill grace the
// server still waits for the reporter's own report of it (the scheduler's,
// or apollo exec's): that report comes once the process group is gone and
// its output read (up to drainGrace more, while a daemon the run started
// in a session of its own keeps the output open), and then through the
// reporter's batch.
const ReportSlack = 5 * time.Second

// ServerDeadline is how long the server lets a run go, from its start,
// before it times the run out itself (timeoutMs, the expectation's
// max_runtime): that is for a reporter that died, so the reporter's own
// timeout report, with the output tails, comes first. 0: no timeout.
func ServerDeadline(timeout, killGrace time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	return timeout + killGrace + ReportSlack
}

func serverDeadline(j *job) time.Duration { return ServerDeadline(j.timeout, j.killGrace) }

// timeoutMs is serverDeadline in milliseconds, as events carry it.
func timeoutMs(j *job) int64 { return serverDeadline(j).Milliseconds() }

func (s *Scheduler) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

func (s *Scheduler) emitPending(r *run, t *task, due time.Time, attempt int) {
	ev := t.event(apollo.StatusPending, s.clock.Now())
	ev.ScheduledAt = due.UnixMilli()
	ev.TimeoutMs = timeoutMs(r.j)
	if attempt > 1 {
		ev.Extra = encodeExtra(map[string]any{"attempt": attempt}, "", "")
	}
	s.emit(t, ev)
}

// endEvent builds the final event of an attempt.
func (s *Scheduler) endEvent(t *task, status apollo.Status, fields map[string]any, res procResult, took time.Duration) apollo.Event {
	ev := t.event(status, s.clock.Now())
	if took > 0 {
		ev.CostMs = took.Milliseconds()
		fields["durationMs"] = ev.CostMs
	}
	ev.Extra = encodeExtra(fields, res.stdout, res.stderr)
	s.log.Info("sched: run ended", "task", t.id, "status", status, "costMs", ev.CostMs)
	return ev
}

// skipEvent builds the event of a run that does not start, and counts it.
// A skipped run is neither a success nor a failure of its job.
func (s *Scheduler) skipEvent(t *task, reason string) apollo.Event {
	ev := t.event(apollo.StatusManualBlocked, s.clock.Now())
	ev.Extra = encodeExtra(map[string]any{"skipped": reason}, "", "")
	s.nSkipped.Add(1)
	s.log.Info("sched: run skipped", "task", t.id, "reason", reason)
	return ev
}

// emit sends ev and records it as the job's latest.
func (s *Scheduler) emit(t *task, ev apollo.Event) {
	s.rep.send(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteLocked(t, ev)
}

// emitLocked is emit for callers that hold s.mu.
func (s *Scheduler) emitLocked(t *task, ev apollo.Event) {
	s.rep.send(ev)
	s.noteLocked(t, ev)
}

func (s *Scheduler) noteLocked(t *task, ev apollo.Event) {
	t.js.lastTask, t.js.lastStatus, t.js.lastAt = ev.TaskID, ev.Status, time.UnixMilli(ev.Ts).UTC()
}
