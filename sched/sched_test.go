package sched

import (
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
	if pending.ScheduledAt != at.UnixMilli() || pending.TimeoutMs != (5*time.Minute+15*time.Second).Milliseconds() || pending.Name != "a" {
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
		// An hourly job runs in real time: no run at the change for the
		// 02:30 that does not exist, an hour between 01:30 CET and 03:30 CEST.
		{"Berlin spring forward, hourly", "30 * * * *", "Europe/Berlin", time.Date(2026, 3, 29, 0, 15, 0, 0, time.UTC),
			[]string{"j@20260329T003000Z#1", "j@20260329T013000Z#1"}},
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
		// d's run is over (it leaves its job's active runs before its
		// success is reported): otherwise, on a loaded machine, 01:00's d
		// could find it still running and be skipped by the default
		// concurrency policy, forbid.
		h.rec.waitFor(t, d.task(), apollo.StatusSuccess)
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
	// A base over the hour is every wait, up to the 365 days the file
	// accepts: never cut, never doubled.
	for _, base := range []time.Duration{3 * time.Hour, maxSpan} {
		for n := 1; n <= maxRetries; n++ {
			if got := retryBackoff(base, n); got != base {
				t.Fatalf("retry %d of a %v backoff waits %v", n, base, got)
			}
		}
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
