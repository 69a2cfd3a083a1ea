package sched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// Tests of the scheduler's life: restarts and catch-up, pause, manual
// triggers, reloads, reporter outages and Stop, on the fake clock.

func TestCatchUpAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, policy := range []Catchup{CatchupOnce, CatchupSkip} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			src := "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    catchup: " + string(policy) + "\n    command: [x]\n"
			h := newHarness(t, src, t0, dir)
			at := h.fire(0)
			p := h.run.next(t)
			p.exit(0)
			h.rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
			h.stop()
			if b, err := os.ReadFile(filepath.Join(dir, stateFileName)); err != nil || !strings.Contains(string(b), `"lastTick": "2026-01-01T01:00:00Z"`) {
				t.Fatalf("state file: %s %v", b, err)
			}

			// Down from 01:00 to 05:30: ticks 02:00 to 05:00 were missed.
			restart := time.Date(2026, 1, 1, 5, 30, 0, 0, time.UTC)
			h2 := newHarness(t, src+"  - name: new\n    schedule: \"0 * * * *\"\n    command: [x]\n", restart, dir)
			missed := time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)
			if policy == CatchupOnce {
				p := h2.run.next(t)
				if p.task() != sid("a", missed, 1) {
					t.Fatalf("catch-up run %s, want the most recent missed tick", p.task())
				}
				pend := h2.rec.waitFor(t, p.task(), apollo.StatusPending)
				if pend.ScheduledAt != missed.UnixMilli() {
					t.Errorf("scheduledAt %d, want the missed tick %d (so the server sees it late)", pend.ScheduledAt, missed.UnixMilli())
				}
				p.exit(0)
				h2.rec.waitFor(t, p.task(), apollo.StatusSuccess)
			} else if h2.s.Stats().Missed != 1 {
				t.Errorf("missed = %d", h2.s.Stats().Missed)
			}
			h2.run.none(t) // one run at most, and none for the job without state
			if next := h2.job("a").Next; !next.Equal(time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)) {
				t.Errorf("next %v", next)
			}
		})
	}
}

// A state file that does not read (a copy cut short, a damaged disk) is
// an error that names it and says what to do, and it is left as it is:
// going on without it would run the jobs paused at run time again, and
// its next write would replace the pauses for good.
func TestCorruptStateRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    command: [x]\n"
	_, err := newScheduler(mustParse(t, src), Options{Clock: apollo.NewFakeClock(t0), Reporter: newRecorder(), Logger: quietLogger(), StateDir: dir}, newFakeRunner(apollo.NewFakeClock(t0)))
	var se *StateError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it away") {
		t.Errorf("New with an unreadable state file: %v; want a StateError naming %s and what to do", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "{not json" {
		t.Errorf("the state file became %q", b)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
jobs:
  - name: a
    schedule: "* * * * *"
    command: [x]
  - name: b
    after: [a]
    command: [x]
`, t0, "")
	if err := h.s.Pause("nope"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Errorf("Pause(nope) = %v", err)
	}
	if err := h.s.Pause("a"); err != nil {
		t.Fatal(err)
	}
	h.advance(1, 30*time.Second) // 00:01: a's tick passes
	if !h.clock.BlockUntil(1, wait) || !h.job("a").Next.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("the paused tick was not consumed: next %v", h.job("a").Next)
	}
	h.run.none(t)
	if !h.job("a").Paused {
		t.Error("Jobs() does not show a paused")
	}
	// A paused downstream job is skipped, visibly.
	if err := h.s.Resume("a"); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Pause("b"); err != nil {
		t.Fatal(err)
	}
	at := h.fire(0)
	p := h.run.next(t)
	p.exit(0)
	ev := h.rec.waitFor(t, sid("b", at, 1), apollo.StatusManualBlocked)
	if x := extra(t, ev); x["skipped"] != "job paused" {
		t.Errorf("extra %v", x)
	}
	h.run.none(t)
}

func TestTrigger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
jobs:
  - name: a
    schedule: "@daily"
    paused: true
    command: [x]
  - name: b
    after: [a]
    command: [x]
`, t0, "")
	if _, err := h.s.Trigger("nope"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Errorf("Trigger(nope) = %v", err)
	}
	id, err := h.s.Trigger("a") // paused jobs run when triggered by hand
	if err != nil {
		t.Fatal(err)
	}
	key := manualKey(t0.UnixMilli())
	if want := "a@" + key + "#1"; id != want {
		t.Fatalf("task ID %q, want %q", id, want)
	}
	p := h.run.next(t)
	if p.task() != id {
		t.Fatalf("started %s", p.task())
	}
	pend := h.rec.waitFor(t, id, apollo.StatusPending)
	if pend.ScheduledAt != t0.UnixMilli() {
		t.Errorf("scheduledAt %d", pend.ScheduledAt)
	}
	if _, err := h.s.Trigger("a"); apollo.ErrorCode(err) != apollo.ECONFLICT {
		t.Errorf("Trigger while running (forbid) = %v", err)
	}
	id2, err := h.s.Trigger("b") // a second trigger in the same millisecond
	if err != nil || id2 != "b@"+manualKey(t0.UnixMilli()+1)+"#1" {
		t.Fatalf("Trigger(b) = %q, %v", id2, err)
	}
	pb := h.run.next(t)
	pb.exit(0)
	// Once its last event is out, a run no longer counts as running: a's
	// downstream run of b is not refused by b's forbid policy.
	h.rec.waitFor(t, id2, apollo.StatusSuccess)
	p.exit(0)
	down := h.run.next(t)
	if down.task() != "b@"+key+"#1" {
		t.Errorf("downstream of the manual run: %s", down.task())
	}
	down.exit(0)
	h.rec.waitFor(t, down.task(), apollo.StatusSuccess)
}

func TestTriggerNeedsARunningScheduler(t *testing.T) {
	t.Parallel()
	s, err := newScheduler(mustParse(t, "jobs:\n  - name: a\n    schedule: \"@daily\"\n    command: [x]\n"), Options{Reporter: newRecorder(), Logger: quietLogger()}, newFakeRunner(apollo.SystemClock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trigger("a"); apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Errorf("before Start: %v", err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Error("Start after Stop succeeded")
	}
}

func TestReload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
jobs:
  - name: a
    schedule: "0 * * * *"
    late_after: 1m
    command: [x]
  - name: gone
    schedule: "0 * * * *"
    command: [x]
`, t0, "")
	at := h.fire(0) // 01:00: a and gone start
	p1, p2 := h.run.next(t), h.run.next(t)

	bad := mustParse(t, "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    command: [x]\n")
	bad.Jobs[0].Schedule = "61 * * * *"
	err := h.s.Reload(bad)
	var fe *FileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "minute field") {
		t.Fatalf("bad reload: %v", err)
	}
	if len(h.s.Jobs()) != 2 || h.s.Expectations()[0].Grace != time.Minute {
		t.Fatalf("a bad reload changed the jobs: %+v", h.s.Jobs())
	}

	good := mustParse(t, `
jobs:
  - name: a
    schedule: "30 * * * *"
    command: [x]
  - name: c
    schedule: "15 * * * *"
    late_after: 5m
    command: [x]
`)
	if err := h.s.Reload(good); err != nil {
		t.Fatal(err)
	}
	if exps := h.s.Expectations(); len(exps) != 2 || exps[1].Job != "c" || exps[1].Grace != 5*time.Minute {
		t.Errorf("expectations after the reload: %+v", exps)
	}
	// Runs in progress finish and are reported, even of a removed job.
	p1.exit(0)
	p2.exit(0)
	h.rec.waitFor(t, sid("gone", at, 1), apollo.StatusSuccess)
	h.rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	if next := h.fire(0); !next.Equal(at.Add(15 * time.Minute)) {
		t.Errorf("first tick after reload %v", next)
	}
	if p := h.run.next(t); p.task() != sid("c", at.Add(15*time.Minute), 1) {
		t.Errorf("started %s", p.task())
	} else {
		p.exit(0)
	}
	if next := h.fire(0); !next.Equal(at.Add(30 * time.Minute)) {
		t.Errorf("a's new schedule: %v", next)
	}
	p := h.run.next(t)
	p.exit(0)
	h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
	if names := []string{h.s.Jobs()[0].Name, h.s.Jobs()[1].Name}; !slices.Equal(names, []string{"a", "c"}) {
		t.Errorf("jobs after reload %v", names)
	}
}

func TestReporterFailureDoesNotStopJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [x]\n", t0, "")
	h.rec.fail.Store(true)
	for range 2 {
		at := h.fire(0)
		p := h.run.next(t)
		p.exit(0)
		h.rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	}
	if n := h.s.Stats().ReportErrors; n != 6 {
		t.Errorf("report errors %d, want 6 (3 events x 2 runs)", n)
	}
}

func TestStopWaitsForRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, etl, t0, "")
	at := h.fire(0)
	p := h.run.next(t)
	h.rec.waitFor(t, p.task(), apollo.StatusRunning)
	stopped := make(chan error, 1)
	go func() { stopped <- h.s.Stop(context.Background()) }()
	select { // Stop has begun once the loop has ended
	case <-h.s.loopDone:
	case <-time.After(wait):
		t.Fatal("the loop did not end")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while a run was going", err)
	default:
	}
	p.exit(0)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop = %v", err)
	}
	h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
	// The downstream run is not started during Stop, but reported.
	ev := h.rec.waitFor(t, sid("transform", at, 1), apollo.StatusManualBlocked)
	if x := extra(t, ev); x["skipped"] != "scheduler stopped" {
		t.Errorf("extra %v", x)
	}
	h.run.none(t)
}

func TestStopDeadlineKillsRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    retries: 3\n    command: [x]\n", t0, "")
	h.fire(0)
	p := h.run.next(t)
	h.rec.waitFor(t, p.task(), apollo.StatusRunning)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.s.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop = %v, want context.Canceled", err)
	}
	ev := h.rec.waitFor(t, p.task(), apollo.StatusTimeout)
	if x := extra(t, ev); x["shutdown"] != true || x["killed"] != true {
		t.Errorf("extra %v", x)
	}
	h.run.none(t) // no retry after a shutdown kill
	if err := h.s.Stop(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("second Stop = %v, want the first one's result", err)
	}
}

func TestStopDuringRetryBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    retries: 1\n    retry_backoff: 5m\n    command: [x]\n", t0, "")
	at := h.fire(0)
	h.run.next(t).exit(1)
	h.rec.waitFor(t, sid("a", at, 2), apollo.StatusPending)
	h.stop()
	ev := h.rec.waitFor(t, sid("a", at, 2), apollo.StatusManualBlocked)
	if x := extra(t, ev); x["skipped"] != "scheduler stopped" {
		t.Errorf("extra %v", x)
	}
	h.run.none(t)
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "jobs: []\n")
	if _, err := New(f, Options{}); err == nil || !strings.Contains(err.Error(), "Options.Reporter is nil") {
		t.Errorf("New without a reporter: %v", err)
	}
	if _, err := New(nil, Options{Reporter: newRecorder()}); err == nil {
		t.Error("New(nil) succeeded")
	}
	hand := &File{Jobs: []Job{{Name: "a", Schedule: "@hourly", Command: []string{"x"}, Timeout: Dur(-time.Second)}}}
	if _, err := New(hand, Options{Reporter: newRecorder()}); err == nil || !strings.Contains(err.Error(), `job "a": timeout: negative`) {
		t.Errorf("New(bad hand-built file): %v", err)
	}
}

// Pause and Resume are in the state file when they return, so a restarted
// scheduler (here a second one on the same directory, while the first is
// never stopped: a kill) keeps them, and does not run or catch up a
// paused job. A jobs file whose paused field changed since wins.
func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `
jobs:
  - name: a
    schedule: "* * * * *"
    command: [x]
  - name: b
    schedule: "* * * * *"
    paused: true
    command: [x]
  - name: c
    after: [a]
    command: [x]
`
	h := newHarness(t, src, t0, dir)
	for _, err := range []error{h.s.Pause("a"), h.s.Resume("b"), h.s.Pause("c")} {
		if err != nil {
			t.Fatal(err)
		}
	}

	// Each scheduler stops before the next starts on its state directory,
	// as a restart does: a run still leaving the first one's state file
	// would otherwise be settled by the next as lost.
	h.stop()
	h2 := newHarness(t, src, t0.Add(5*time.Minute), dir)
	for name, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if got := h2.job(name).Paused; got != want {
			t.Errorf("after the restart %s paused = %v, want %v", name, got, want)
		}
	}
	// Both missed 00:01 to 00:05; only b, resumed, is caught up.
	if p, missed := h2.run.next(t), time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC); p.task() != sid("b", missed, 1) {
		t.Fatalf("ran %s; want b's catch-up only (a is paused)", p.task())
	} else {
		p.exit(0)
		h2.rec.waitFor(t, p.task(), apollo.StatusSuccess)
	}
	h2.run.none(t)

	// Paused again, b is saved paused as its file says. The file then
	// drops b's paused: a changed field wins over the saved state.
	if err := h2.s.Pause("b"); err != nil {
		t.Fatal(err)
	}
	h2.stop()
	h3 := newHarness(t, strings.Replace(src, "    paused: true\n", "", 1), t0.Add(10*time.Minute), dir)
	for name, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if got := h3.job(name).Paused; got != want {
			t.Errorf("after the file changed %s paused = %v, want %v", name, got, want)
		}
	}
}

// A pause that cannot be saved is refused and undone: the caller is told
// nothing changed, and nothing did.
func TestPauseThatCannotBeSaved(t *testing.T) {
	t.Parallel()
	notADir := filepath.Join(t.TempDir(), "file")
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [x]\n", t0, notADir)
	// The state directory turns into a file once the scheduler runs.
	if err := os.RemoveAll(notADir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(notADir, nil, 0o644)
	if err := h.s.Pause("a"); apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Fatalf("Pause with an unwritable state directory: %v, want unavailable", err)
	}
	if h.job("a").Paused {
		t.Fatal("a pause that was not saved holds")
	}
}

// A scheduler that dies (kill -9) leaves its tasks in progress in the
// state file; the next one settles each with the sequence of its last
// event: failed and lost for a run whose process started, skipped for a
// retry that was waiting. The state written while they ran is what a
// kill -9 leaves, copied before the first scheduler stops.
func TestLostRunsSettledAfterRestart(t *testing.T) {
	t.Parallel()
	dir, crashed := t.TempDir(), t.TempDir()
	src := `
jobs:
  - name: a
    schedule: "0 * * * *"
    retries: 1
    retry_backoff: 1m
    command: [x]
  - name: b
    schedule: "0 * * * *"
    command: [x]
`
	h := newHarness(t, src, t0, dir)
	at := h.fire(0)
	procs := map[string]*fakeProc{}
	for range 2 {
		p := h.run.next(t)
		procs[p.task()] = p
	}
	h.rec.waitFor(t, sid("b", at, 1), apollo.StatusRunning)
	procs[sid("a", at, 1)].exit(1)
	h.rec.waitFor(t, sid("a", at, 2), apollo.StatusPending)
	state, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, stateFileName), state, 0o644); err != nil {
		t.Fatal(err)
	}

	rec := newRecorder()
	s, err := newScheduler(mustParse(t, src), Options{Clock: apollo.NewFakeClock(at.Add(time.Minute)), Reporter: rec, Logger: quietLogger(), StateDir: crashed}, newFakeRunner(h.clock))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Stop(ctx)
	}()
	lost := rec.waitFor(t, sid("b", at, 1), apollo.StatusFailed)
	if x := extra(t, lost); lost.Sequence != 3 || x["lost"] != true || x["attempt"] != 1.0 || lost.Name != "b" {
		t.Errorf("lost run: sequence %d, extra %v; want sequence 3 (after pending and running), lost, attempt 1", lost.Sequence, x)
	}
	retry := rec.waitFor(t, sid("a", at, 2), apollo.StatusManualBlocked)
	if x := extra(t, retry); retry.Sequence != 2 || x["skipped"] != "scheduler stopped" {
		t.Errorf("lost retry: sequence %d, extra %v; want sequence 2 (after pending), skipped", retry.Sequence, x)
	}
	if n := len(rec.all()); n != 2 {
		t.Errorf("%d events, want the two settling ones:\n%s", n, rec.dump())
	}
	b, err := os.ReadFile(filepath.Join(crashed, stateFileName))
	if err != nil || strings.Contains(string(b), `"runs"`) {
		t.Errorf("the settled runs are still in the state file: %s %v", b, err)
	}
}

// flushingRecorder is a reporter that can say its events are delivered,
// as the agent client does (Flush): at once.
type flushingRecorder struct{ *recorder }

func (flushingRecorder) Flush(context.Context) error { return nil }

// With a reporter that says when its events are delivered, an ended run
// leaves the state file once they are: at the latest at Stop, so that a
// scheduler stopped gracefully leaves nothing for the next one to settle.
func TestEndedRunsLeaveTheStateFileAtStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(t0)
	rec, runner := newRecorder(), newFakeRunner(clock)
	s, err := newScheduler(mustParse(t, `
jobs:
  - name: a
    schedule: "0 * * * *"
    command: [x]
`), Options{Clock: clock, Reporter: flushingRecorder{rec}, Logger: quietLogger(), StateDir: dir}, runner)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !clock.BlockUntil(1, wait) {
		t.Fatal("the loop armed no timer")
	}
	at := s.Jobs()[0].Next
	clock.Set(at)
	runner.next(t).exit(0)
	rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil || strings.Contains(string(b), `"runs"`) {
		t.Errorf("a run that ended and was delivered is still in the state file after Stop: %s %v", b, err)
	}
}

// A scheduler started on a clock behind the last tick its state file
// holds (the host's clock was stepped back, a VM resumed from a snapshot)
// does not run that tick again: its task ID is taken, so the server would
// drop the second run's events as duplicates of the first's, and the run
// would go unseen. It waits for the clock to pass the tick, as a running
// scheduler does when its clock steps back.
func TestRestartOnAClockBehindTheState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [x]\n"
	h := newHarness(t, src, t0, dir)
	at := h.fire(0) // 00:01
	h.run.next(t).exit(0)
	h.rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	h.stop()

	h2 := newHarness(t, src, t0.Add(-time.Hour), dir) // 23:00:30 the day before
	if next := h2.job("a").Next; !next.Equal(at.Add(time.Minute)) {
		t.Errorf("next tick %v after a restart an hour behind its last tick %v; want the one after it", next, at)
	}
	h2.run.none(t)
	h2.fire(0)
	if p := h2.run.next(t); p.task() != sid("a", at.Add(time.Minute), 1) {
		t.Errorf("the first run after the restart is %s, want the tick after %v", p.task(), at)
	} else {
		p.exit(0)
		h2.rec.waitFor(t, p.task(), apollo.StatusSuccess)
	}
}

// slowFlusher is a reporter whose deliveries hang (a slow or unreachable
// server) until released; it counts the Flush calls waiting at once.
type slowFlusher struct {
	*recorder
	release          chan struct{}
	waiting, maxWait atomic.Int64
}

func (f *slowFlusher) Flush(ctx context.Context) error {
	n := f.waiting.Add(1)
	defer f.waiting.Add(-1)
	for m := f.maxWait.Load(); n > m && !f.maxWait.CompareAndSwap(m, n); m = f.maxWait.Load() {
	}
	select {
	case <-f.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// While the reporter cannot deliver (the server hangs), the runs of a job
// due every second that end wait for delivery together: one wait, not one
// goroutine per run that piles up for as long as the server is slow. Each
// run's end is sent all the same, and once delivery resumes every ended
// run leaves the state file.
func TestSlowDeliveryDoesNotPileUpWaits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(t0)
	rec, runner := newRecorder(), newFakeRunner(clock)
	rep := &slowFlusher{recorder: rec, release: make(chan struct{})}
	s, err := newScheduler(mustParse(t, "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    command: [x]\n"),
		Options{Clock: clock, Reporter: rep, Logger: quietLogger(), StateDir: dir}, runner)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	const runs = 30
	for range runs {
		if !clock.BlockUntil(1, wait) {
			t.Fatal("the loop armed no timer")
		}
		at := s.Jobs()[0].Next
		clock.Set(at)
		runner.next(t).exit(0)
		rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	}
	if n := rep.maxWait.Load(); n > 1 {
		t.Errorf("%d waits for delivery at once after %d runs ended; want at most 1", n, runs)
	}
	s.runs.Wait() // the last run is past its untrack
	close(rep.release)
	s.flushes.Wait()
	s.mu.Lock()
	left := len(s.live)
	s.mu.Unlock()
	if left != 0 {
		t.Errorf("%d ended runs still kept for the state file once delivered", left)
	}
}

// steppedClock is a host's clock as the scheduler meets it: Now is the
// wall clock, which can step (NTP, a VM resumed), while timers run on the
// monotonic clock, which does not follow the step.
type steppedClock struct {
	*apollo.FakeClock
	step atomic.Int64 // how far the wall clock stepped, in ns
}

func (c *steppedClock) Now() time.Time { return c.FakeClock.Now().Add(time.Duration(c.step.Load())) }

// A run due while the wall clock stepped forward (or the host slept)
// starts within seconds of the step, not when the timer armed before it
// would have fired: here a daily job at 03:00, armed at 00:00:30 for
// 2h59m30s, and the clock stepping to 03:00:30. Before, the run waited for
// that timer, 2h59m30s later (up to a day late for a job armed just after
// its run).
func TestRunDueAfterAClockStepStarts(t *testing.T) {
	t.Parallel()
	clock := &steppedClock{FakeClock: apollo.NewFakeClock(t0)}
	rec, runner := newRecorder(), newFakeRunner(clock)
	s, err := newScheduler(mustParse(t, "jobs:\n  - name: a\n    schedule: \"0 3 * * *\"\n    command: [x]\n"),
		Options{Clock: clock, Reporter: rec, Logger: quietLogger()}, runner)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if !clock.BlockUntil(1, wait) {
		t.Fatal("the loop armed no timer")
	}
	clock.step.Store(int64(3 * time.Hour))
	clock.Advance(recheckEvery)
	p := runner.next(t)
	if want := sid("a", time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC), 1); p.task() != want {
		t.Errorf("ran %s, want %s", p.task(), want)
	}
	p.exit(0)
	rec.waitFor(t, p.task(), apollo.StatusSuccess)
}

// Two schedulers on one state directory would run every job twice, write
// over each other's state, and each settle the other's runs as lost at
// its next start, killing their processes. The second one to start is
// refused, saying why; once the first stops, it starts.
func TestOneSchedulerPerStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    command: [x]\n"
	h := newHarness(t, src, t0, dir)
	clock := apollo.NewFakeClock(t0)
	second, err := newScheduler(mustParse(t, src), Options{Clock: clock, Reporter: newRecorder(), Logger: quietLogger(), StateDir: dir}, newFakeRunner(clock))
	if err != nil {
		t.Fatal(err)
	}
	err = second.Start(context.Background())
	if err == nil {
		second.Stop(context.Background())
		t.Fatal("a second scheduler started on the state directory of a running one")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "another scheduler") {
		t.Errorf("the refusal does not say which directory and why: %v", err)
	}
	h.stop()
	if err := second.Start(context.Background()); err != nil {
		t.Fatalf("the state directory is not free once its scheduler stopped: %v", err)
	}
	second.Stop(context.Background())
}
