package sched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

func TestScheduledRunLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
jobs:
  - name: a
    schedule: "* * * * *"
    command: [work, --now]
    env: {FOO: bar}
    dir: /srv
    timeout: 5m
    kill_grace: 10s
`, t0, "")
	at := h.fire(0)
	if want := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC); !at.Equal(want) {
		t.Fatalf("first tick %v, want %v", at, want)
	}
	p := h.run.next(t)
	id := sid("a", at, 1)
	if p.task() != "a@20260101T000100Z#1" || id != p.task() {
		t.Fatalf("task ID %q", p.task())
	}
	if got := strings.Join(p.spec.argv, " "); got != "work --now" || p.spec.dir != "/srv" {
		t.Errorf("argv %q dir %q", got, p.spec.dir)
	}
	for k, want := range map[string]string{"FOO": "bar", "APOLLO_JOB_NAME": "a", "APOLLO_SCHEDULED_AT": "2026-01-01T00:01:00Z", "APOLLO_ATTEMPT": "1"} {
		if got := p.env(k); got != want {
			t.Errorf("env %s = %q, want %q", k, got, want)
		}
	}
	pending := h.rec.waitFor(t, id, apollo.StatusPending)
	if pending.ScheduledAt != at.UnixMilli() || pending.TimeoutMs != (5*time.Minute+10*time.Second).Milliseconds() || pending.Name != "a" {
		t.Errorf("pending = %+v", pending)
	}
	h.rec.waitFor(t, id, apollo.StatusRunning)
	h.advance(2, 42*time.Second) // the loop's timer and the run's timeout
	p.exit(0)
	ok := h.rec.waitFor(t, id, apollo.StatusSuccess)
	x := extra(t, ok)
	if x["attempt"] != 1.0 || x["exitCode"] != 0.0 || x["durationMs"] != 42000.0 || x["stdoutTail"] != "out\n" || x["stderrTail"] != "err\n" {
		t.Errorf("success extra = %v", x)
	}
	if ok.CostMs != 42000 {
		t.Errorf("costMs = %d", ok.CostMs)
	}
	js := h.job("a")
	if js.LastTaskID != id || js.LastStatus != apollo.StatusSuccess || !js.Next.Equal(at.Add(time.Minute)) || js.Running != 0 || js.Schedule != "* * * * *" {
		t.Errorf("Jobs() = %+v", js)
	}

	at = h.fire(0)
	p = h.run.next(t)
	p.exit(3)
	failed := h.rec.waitFor(t, sid("a", at, 1), apollo.StatusFailed)
	if x := extra(t, failed); x["exitCode"] != 3.0 || x["attempt"] != 1.0 {
		t.Errorf("failed extra = %v", x)
	}
}

// TestScheduleKinds drives the loop with the fake clock through each kind
// of schedule, including both 2026 DST changes in Berlin.
func TestScheduleKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule string
		timezone string
		start    time.Time
		want     []string // task IDs, in order
	}{
		{"5 fields", "*/20 * * * *", "UTC", t0,
			[]string{"j@20260101T002000Z#1", "j@20260101T004000Z#1", "j@20260101T010000Z#1"}},
		{"6 fields", "*/15 * * * * *", "UTC", t0,
			[]string{"j@20260101T000045Z#1", "j@20260101T000100Z#1", "j@20260101T000115Z#1"}},
		{"@every", "@every 45s", "UTC", t0,
			[]string{"j@20260101T000045Z#1", "j@20260101T000130Z#1", "j@20260101T000215Z#1"}},
		{"@hourly", "@hourly", "UTC", t0,
			[]string{"j@20260101T010000Z#1", "j@20260101T020000Z#1"}},
		{"Shanghai", "0 9 * * *", "Asia/Shanghai", t0,
			[]string{"j@20260101T010000Z#1", "j@20260102T010000Z#1"}},
		// 02:30 does not exist on 2026-03-29: that run is at 03:00 CEST (01:00Z).
		{"Berlin spring forward", "30 2 * * *", "Europe/Berlin", time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC),
			[]string{"j@20260328T013000Z#1", "j@20260329T010000Z#1", "j@20260330T003000Z#1"}},
		// 02:30 happens twice on 2026-10-25: it runs once, at the first.
		{"Berlin fall back", "30 2 * * *", "Europe/Berlin", time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC),
			[]string{"j@20261025T003000Z#1", "j@20261026T013000Z#1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "jobs:\n  - name: j\n    schedule: \""+tc.schedule+"\"\n    timezone: "+tc.timezone+"\n    command: [x]\n", tc.start, "")
			var got []string
			for range tc.want {
				h.fire(0)
				p := h.run.next(t)
				got = append(got, p.task())
				p.exit(0)
				h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("runs\n got  %v\n want %v", got, tc.want)
			}
		})
	}
}

func TestConcurrencyForbid(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [x]\n", t0, "")
	first := h.fire(0)
	p := h.run.next(t)
	second := h.fire(0)
	skipped := h.rec.waitFor(t, sid("a", second, 1), apollo.StatusManualBlocked)
	if x := extra(t, skipped); x["skipped"] != "previous run still running" {
		t.Errorf("skip extra = %v", x)
	}
	h.run.none(t)
	if h.s.Stats().Skipped != 1 || h.job("a").Running != 1 {
		t.Errorf("stats %+v, running %d", h.s.Stats(), h.job("a").Running)
	}
	p.exit(0)
	h.rec.waitFor(t, sid("a", first, 1), apollo.StatusSuccess)
	third := h.fire(0)
	if p := h.run.next(t); p.task() != sid("a", third, 1) {
		t.Errorf("after the run ended, %s started", p.task())
	}
}

func TestConcurrencyAllow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    concurrency: allow\n    command: [x]\n", t0, "")
	h.fire(0)
	p1 := h.run.next(t)
	h.fire(0)
	p2 := h.run.next(t)
	h.rec.waitFor(t, p2.task(), apollo.StatusRunning)
	if n := h.job("a").Running; n != 2 {
		t.Errorf("running = %d, want 2", n)
	}
	p2.exit(0)
	p1.exit(0)
	h.rec.waitFor(t, p1.task(), apollo.StatusSuccess)
	h.rec.waitFor(t, p2.task(), apollo.StatusSuccess)
}

func TestConcurrencyReplace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    concurrency: replace\n    kill_grace: 10s\n    command: [x]\n", t0, "")
	h.fire(0)
	old := h.run.next(t)
	old.ignoreTerm.Store(true)
	h.rec.waitFor(t, old.task(), apollo.StatusRunning)
	at := h.fire(0)
	// The old run got SIGTERM, ignores it, and is killed after kill_grace;
	// only then does the new run start.
	h.advance(2, 10*time.Second) // the loop's timer and the kill grace
	replaced := h.rec.waitFor(t, old.task(), apollo.StatusFailed)
	if x := extra(t, replaced); x["replaced"] != true || x["killed"] != true {
		t.Errorf("replaced extra = %v", x)
	}
	if got := old.sigs(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("signals %v", got)
	}
	p := h.run.next(t)
	if p.task() != sid("a", at, 1) {
		t.Errorf("new run %s", p.task())
	}
	evs := h.rec.all()
	failedAt := slices.IndexFunc(evs, func(e apollo.Event) bool { return e.TaskID == old.task() && e.Status == apollo.StatusFailed })
	runningAt := slices.IndexFunc(evs, func(e apollo.Event) bool { return e.TaskID == p.task() && e.Status == apollo.StatusRunning })
	if runningAt >= 0 && runningAt < failedAt {
		t.Errorf("the new run started before the old one was reported:\n%s", h.rec.dump())
	}
	p.exit(0)
	h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
}

const etl = `
jobs:
  - name: extract
    schedule: "0 * * * *"
    command: [x]
  - name: transform
    after: [extract]
    command: [x]
  - name: load
    after: [extract, transform]
    command: [x]
  - name: report
    after: [load]
    command: [x]
`

func TestDependencyOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, etl, t0, "")
	at := h.fire(0)
	for _, name := range []string{"extract", "transform", "load", "report"} {
		p := h.run.next(t)
		if want := sid(name, at, 1); p.task() != want {
			t.Fatalf("started %s, want %s", p.task(), want)
		}
		h.run.none(t)
		if name != "extract" && p.env("APOLLO_SCHEDULED_AT") != "2026-01-01T01:00:00Z" {
			t.Errorf("%s: APOLLO_SCHEDULED_AT = %q, want the trigger's time", name, p.env("APOLLO_SCHEDULED_AT"))
		}
		h.advance(1, time.Minute)
		p.exit(0)
		ev := h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
		if name != "extract" {
			pend := h.rec.waitFor(t, p.task(), apollo.StatusPending)
			if pend.ScheduledAt == at.UnixMilli() {
				t.Errorf("%s: scheduledAt is the trigger's time; a downstream run is due when its upstreams end", name)
			}
		}
		_ = ev
	}
}

func TestDependencySkipPropagation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, etl, t0, "")
	at := h.fire(0)
	p := h.run.next(t)
	p.exit(1)
	h.rec.waitFor(t, sid("extract", at, 1), apollo.StatusFailed)
	for _, name := range []string{"transform", "load", "report"} {
		ev := h.rec.waitFor(t, sid(name, at, 1), apollo.StatusManualBlocked)
		if x := extra(t, ev); x["skipped"] != "upstream extract failed" {
			t.Errorf("%s: extra %v", name, x)
		}
	}
	h.run.none(t)
	if s := h.s.Stats().Skipped; s != 3 {
		t.Errorf("skipped = %d", s)
	}
	if js := h.job("load"); js.LastStatus != apollo.StatusManualBlocked {
		t.Errorf("load's last status %v", js.LastStatus)
	}
}

// TestDependencySameTrigger: a job after two upstreams waits for both when
// they run at the same time, and runs after each when they do not.
func TestDependencySameTrigger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
jobs:
  - name: a
    schedule: "0 * * * *"
    command: [x]
  - name: b
    schedule: "0,30 * * * *"
    command: [x]
  - name: d
    after: [a, b]
    command: [x]
`, t0, "")
	h.fire(0) // 00:30: b alone
	p := h.run.next(t)
	p.exit(0)
	if d := h.run.next(t); d.task() != "d@20260101T003000Z#1" {
		t.Fatalf("after b alone, %s started", d.task())
	} else {
		d.exit(0)
	}
	h.fire(0) // 01:00: a and b
	p1, p2 := h.run.next(t), h.run.next(t)
	p1.exit(0)
	h.rec.waitFor(t, p1.task(), apollo.StatusSuccess)
	h.run.none(t)
	p2.exit(0)
	if d := h.run.next(t); d.task() != "d@20260101T010000Z#1" {
		t.Fatalf("after both, %s started", d.task())
	} else {
		d.exit(0)
		h.rec.waitFor(t, d.task(), apollo.StatusSuccess)
	}
}

func TestRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
jobs:
  - name: a
    schedule: "0 * * * *"
    retries: 2
    retry_backoff: 30s
    command: [x]
  - name: b
    after: [a]
    command: [x]
`, t0, "")
	at := h.fire(0)
	wantWait := []time.Duration{30 * time.Second, time.Minute}
	for attempt := 1; attempt <= 3; attempt++ {
		p := h.run.next(t)
		if p.task() != sid("a", at, attempt) || p.env("APOLLO_ATTEMPT") != string(rune('0'+attempt)) {
			t.Fatalf("attempt %d is %s (APOLLO_ATTEMPT %s)", attempt, p.task(), p.env("APOLLO_ATTEMPT"))
		}
		if attempt == 3 {
			p.exit(0)
			ev := h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
			if extra(t, ev)["attempt"] != 3.0 {
				t.Errorf("attempt in extra: %s", ev.Extra)
			}
			break
		}
		p.exit(1)
		failed := h.rec.waitFor(t, p.task(), apollo.StatusFailed)
		if extra(t, failed)["attempt"] != float64(attempt) {
			t.Errorf("failed extra %s", failed.Extra)
		}
		retry := h.rec.waitFor(t, sid("a", at, attempt+1), apollo.StatusPending)
		if x := extra(t, retry); x["attempt"] != float64(attempt+1) {
			t.Errorf("retry pending extra %v", x)
		}
		if want := h.clock.Now().Add(wantWait[attempt-1]).UnixMilli(); retry.ScheduledAt != want {
			t.Errorf("retry %d due at %d, want %d", attempt+1, retry.ScheduledAt, want)
		}
		h.run.none(t)
		h.advance(2, wantWait[attempt-1]-time.Second) // not yet
		h.run.none(t)
		h.advance(2, time.Second)
	}
	if b := h.run.next(t); b.task() != sid("b", at, 1) {
		t.Errorf("downstream %s", b.task())
	} else {
		b.exit(0)
		h.rec.waitFor(t, b.task(), apollo.StatusSuccess)
	}
}

func TestRetryBackoffDoublesToAnHour(t *testing.T) {
	t.Parallel()
	got := []time.Duration{}
	for n := 1; n <= 9; n++ {
		got = append(got, retryBackoff(20*time.Minute, n))
	}
	want := []time.Duration{20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour}
	if !slices.Equal(got, want) {
		t.Errorf("backoffs %v", got)
	}
	if retryBackoff(0, 5) != 0 {
		t.Error("zero backoff doubled")
	}
}

func TestTimeoutKillsAfterGrace(t *testing.T) {
	t.Parallel()
	for _, stubborn := range []bool{false, true} {
		t.Run(map[bool]string{false: "obeys SIGTERM", true: "ignores SIGTERM"}[stubborn], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    timeout: 1m\n    kill_grace: 10s\n    retries: 1\n    retry_backoff: 0\n    command: [x]\n", t0, "")
			at := h.fire(0)
			p := h.run.next(t)
			p.ignoreTerm.Store(stubborn)
			h.rec.waitFor(t, p.task(), apollo.StatusRunning)
			h.advance(2, time.Minute) // the loop's timer and the timeout
			want := []syscall.Signal{syscall.SIGTERM}
			if stubborn {
				h.advance(2, 10*time.Second) // the loop's timer and the grace
				want = append(want, syscall.SIGKILL)
			}
			ev := h.rec.waitFor(t, p.task(), apollo.StatusTimeout)
			if x := extra(t, ev); x["killed"] != true || x["attempt"] != 1.0 || x["shutdown"] != nil {
				t.Errorf("timeout extra %v", x)
			}
			if got := p.sigs(); !slices.Equal(got, want) {
				t.Errorf("signals %v, want %v", got, want)
			}
			// A timed-out run is retried.
			retry := h.run.next(t)
			if retry.task() != sid("a", at, 2) {
				t.Fatalf("retry %s", retry.task())
			}
			retry.exit(0)
			h.rec.waitFor(t, retry.task(), apollo.StatusSuccess)
		})
	}
}

func TestStartFailureIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    command: [x]\n", t0, "")
	h.run.refuse.Store(true)
	at := h.fire(0)
	ev := h.rec.waitFor(t, sid("a", at, 1), apollo.StatusFailed)
	if x := extra(t, ev); x["exitCode"] != -1.0 || x["error"] != "exec: no such file" {
		t.Errorf("extra %v", x)
	}
	if _, ran, _ := h.rec.find(sid("a", at, 1), apollo.StatusRunning); ran {
		t.Error("reported running for a process that never started")
	}
}

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

func TestCorruptStateIsIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    command: [x]\n", t0, dir)
	if h.s.Stats().StateErrors != 1 {
		t.Errorf("state errors %d", h.s.Stats().StateErrors)
	}
	h.fire(0)
	p := h.run.next(t)
	p.exit(0)
	h.rec.waitFor(t, p.task(), apollo.StatusSuccess)
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
	if len(h.s.Jobs()) != 2 || h.s.Thresholds()["a"] != time.Minute {
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
	if th := h.s.Thresholds(); len(th) != 1 || th["c"] != 5*time.Minute {
		t.Errorf("thresholds %v", th)
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
