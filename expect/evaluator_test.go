package expect

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// sim drives an Evaluator the way a server does: a fake clock moves in
// steps, the runs reported up to the clock's time are fed, then Tick.
type sim struct {
	t     *testing.T
	clock *apollo.FakeClock
	ev    *Evaluator
	feed  []feedItem // in time order
	got   []Event
}

type feedItem struct {
	end, skip bool
	run       Run
}

func newSim(t *testing.T, start time.Time, sets map[string]string) *sim {
	t.Helper()
	s := &sim{t: t, clock: apollo.NewFakeClock(start), ev: NewEvaluator()}
	for tenant, src := range sets {
		if evs := s.ev.Set(tenant, mustParse(t, src), start); len(evs) > 0 {
			t.Fatalf("Set returned %v", evs)
		}
	}
	return s
}

// start and finish queue a run's start and end, fed when the clock
// reaches them.
func (s *sim) start(tenant, job, task string, at time.Time) {
	s.queue(feedItem{run: Run{Tenant: tenant, Job: job, TaskID: task, At: at}})
}

func (s *sim) finish(tenant, job, task string, at time.Time, st apollo.Status, d time.Duration) {
	s.queue(feedItem{end: true, run: Run{Tenant: tenant, Job: job, TaskID: task, At: at, Status: st, Duration: d}})
}

// skip queues a run skipped on purpose (manual_blocked) at at.
func (s *sim) skip(tenant, job, task string, at time.Time) {
	s.queue(feedItem{skip: true, run: Run{Tenant: tenant, Job: job, TaskID: task, At: at}})
}

func (s *sim) queue(f feedItem) {
	i, _ := slices.BinarySearchFunc(s.feed, f.run.At, func(x feedItem, at time.Time) int {
		if x.run.At.After(at) {
			return 1
		}
		return -1 // equal times keep the order they were queued in
	})
	s.feed = slices.Insert(s.feed, i, f)
}

// until moves the clock to end in steps, feeding and ticking.
func (s *sim) until(end time.Time, step time.Duration) {
	for s.clock.Now().Before(end) {
		s.clock.Advance(min(step, end.Sub(s.clock.Now())))
		now := s.clock.Now()
		for len(s.feed) > 0 && !s.feed[0].run.At.After(now) {
			f := s.feed[0]
			s.feed = s.feed[1:]
			switch {
			case f.end:
				s.got = append(s.got, s.ev.Finished(f.run)...)
			case f.skip:
				s.got = append(s.got, s.ev.Skipped(f.run)...)
			default:
				s.got = append(s.got, s.ev.Started(f.run)...)
			}
		}
		s.got = append(s.got, s.ev.Tick(now)...)
	}
}

// take returns the events so far, one line each, in time order (events of
// one moment in their lines' order), and forgets them.
func (s *sim) take() []string {
	evs := slices.Clone(s.got)
	slices.SortStableFunc(evs, func(a, b Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(line(a), line(b))
	})
	var lines []string
	for _, e := range evs {
		lines = append(lines, line(e))
	}
	s.got = nil
	return lines
}

func line(e Event) string {
	s := fmt.Sprintf("%s %s/%s slot=%s at=%s", e.Kind, e.Tenant, e.Job, e.Slot.UTC().Format("01-02T15:04:05Z"), e.At.UTC().Format("01-02T15:04:05Z"))
	if e.TaskID != "" {
		s += " task=" + e.TaskID
	}
	if e.Count != 1 {
		s += fmt.Sprintf(" count=%d", e.Count)
	}
	return s
}

func expectLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func utc(y int, m time.Month, d, h, min int) time.Time {
	return time.Date(y, m, d, h, min, 0, 0, time.UTC)
}

const berlinDaily = `expectations:
  - job: backup
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    grace: 10m
`

// TestMissedAcrossDST: a daily 02:30 Europe/Berlin job over both 2026
// changes, with the clock ticking every minute. On 2026-03-29 02:30 does
// not exist: the run is expected at the change, 03:00 CEST (01:00 UTC).
// On 2026-10-25 02:30 happens twice: the run is expected at the first,
// 02:30 CEST (00:30 UTC), as the scheduler runs it.
func TestMissedAcrossDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		from, to   time.Time
		runs       []time.Time // starts of tenant a's runs; tenant b never runs
		wantA      []string
		wantBSlots []string
	}{
		{"spring, no runs", utc(2026, 3, 27, 12, 0), utc(2026, 3, 31, 0, 0), nil,
			[]string{
				"missed a/backup slot=03-28T01:30:00Z at=03-28T01:40:00Z",
				"missed a/backup slot=03-29T01:00:00Z at=03-29T01:10:00Z",
				"missed a/backup slot=03-30T00:30:00Z at=03-30T00:40:00Z",
			},
			[]string{"03-28T01:30:00Z", "03-29T01:00:00Z", "03-30T00:30:00Z"}},
		{"spring, runs at each expected time", utc(2026, 3, 27, 12, 0), utc(2026, 3, 31, 0, 0),
			[]time.Time{utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)}, nil,
			[]string{"03-28T01:30:00Z", "03-29T01:00:00Z", "03-30T00:30:00Z"}},
		{"spring, a cron that skips the night of the change", utc(2026, 3, 27, 12, 0), utc(2026, 3, 31, 0, 0),
			[]time.Time{utc(2026, 3, 28, 1, 30), utc(2026, 3, 30, 0, 30)},
			[]string{"missed a/backup slot=03-29T01:00:00Z at=03-29T01:10:00Z"},
			[]string{"03-28T01:30:00Z", "03-29T01:00:00Z", "03-30T00:30:00Z"}},
		{"autumn, no runs", utc(2026, 10, 23, 12, 0), utc(2026, 10, 27, 0, 0), nil,
			[]string{
				"missed a/backup slot=10-24T00:30:00Z at=10-24T00:40:00Z",
				"missed a/backup slot=10-25T00:30:00Z at=10-25T00:40:00Z",
				"missed a/backup slot=10-26T01:30:00Z at=10-26T01:40:00Z",
			},
			[]string{"10-24T00:30:00Z", "10-25T00:30:00Z", "10-26T01:30:00Z"}},
		{"autumn, runs at each expected time", utc(2026, 10, 23, 12, 0), utc(2026, 10, 27, 0, 0),
			[]time.Time{utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)}, nil,
			[]string{"10-24T00:30:00Z", "10-25T00:30:00Z", "10-26T01:30:00Z"}},
		{"autumn, a cron that runs at the second 02:30", utc(2026, 10, 23, 12, 0), utc(2026, 10, 27, 0, 0),
			[]time.Time{utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 1, 30), utc(2026, 10, 26, 1, 30)},
			[]string{"missed a/backup slot=10-25T00:30:00Z at=10-25T00:40:00Z"},
			[]string{"10-24T00:30:00Z", "10-25T00:30:00Z", "10-26T01:30:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, tc.from, map[string]string{"a": berlinDaily, "b": berlinDaily})
			for i, at := range tc.runs {
				s.start("a", "backup", fmt.Sprint(i), at)
			}
			s.until(tc.to, time.Minute)
			var gotA, gotB []string
			for _, e := range s.got {
				if e.Tenant == "a" {
					gotA = append(gotA, line(e))
					continue
				}
				gotB = append(gotB, e.Slot.UTC().Format("01-02T15:04:05Z"))
				if e.Kind != KindMissed || e.Count != 1 || !e.At.Equal(e.Slot.Add(10*time.Minute)) {
					t.Errorf("tenant b: %s", line(e))
				}
			}
			expectLines(t, gotA, tc.wantA...)
			expectLines(t, gotB, tc.wantBSlots...)
		})
	}
}

func TestMissedDetail(t *testing.T) {
	t.Parallel()
	s := newSim(t, utc(2026, 3, 28, 0, 0), map[string]string{"a": berlinDaily})
	s.until(utc(2026, 3, 29, 2, 0), time.Minute)
	var details []string
	for _, e := range s.got {
		details = append(details, e.Detail)
	}
	expectLines(t, details,
		"no run started by 2026-03-28 02:40:00 CET (expected 2026-03-28 02:30:00 CET, grace 10m)",
		"no run started by 2026-03-29 03:10:00 CEST (expected 2026-03-29 03:00:00 CEST, grace 10m)")
}

// TestMissedEvery: a period counts from the latest start; each period
// without a start is one missed run, told once.
func TestMissedEvery(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 10, 0)
	s := newSim(t, t0, map[string]string{
		"a": "expectations:\n  - {job: sync, every: 15m, grace: 2m}\n",
		"b": "expectations:\n  - {job: sync, every: 15m, grace: 2m}\n",
	})
	for _, m := range []int{3, 20, 34} { // jitter does not matter: the next is expected 15m after
		s.start("a", "sync", fmt.Sprint(m), t0.Add(time.Duration(m)*time.Minute))
		s.start("b", "sync", fmt.Sprint(m), t0.Add(time.Duration(m)*time.Minute))
	}
	s.start("a", "sync", "late", t0.Add(100*time.Minute))
	s.until(t0.Add(2*time.Hour), 10*time.Second)
	expectLines(t, s.take(),
		"missed a/sync slot=05-01T10:49:00Z at=05-01T10:51:00Z",
		"missed b/sync slot=05-01T10:49:00Z at=05-01T10:51:00Z",
		"missed a/sync slot=05-01T11:04:00Z at=05-01T11:06:00Z",
		"missed b/sync slot=05-01T11:04:00Z at=05-01T11:06:00Z",
		"missed a/sync slot=05-01T11:19:00Z at=05-01T11:21:00Z",
		"missed b/sync slot=05-01T11:19:00Z at=05-01T11:21:00Z",
		"missed a/sync slot=05-01T11:34:00Z at=05-01T11:36:00Z",
		"missed b/sync slot=05-01T11:34:00Z at=05-01T11:36:00Z",
		"missed b/sync slot=05-01T11:49:00Z at=05-01T11:51:00Z",
		// a's run at 11:40 expects the next at 11:55.
		"missed a/sync slot=05-01T11:55:00Z at=05-01T11:57:00Z",
	)
}

// TestMissedCatchUp: when Tick comes late, or expectations are set from a
// time in the past, every expected run up to now is judged at once and
// the misses of one job make one event with their count.
func TestMissedCatchUp(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	ev := NewEvaluator()
	ev.Set("a", mustParse(t, "expectations:\n  - {job: five, schedule: \"*/5 * * * *\", grace: 1m}\n  - {job: period, every: 5m, grace: 1m}\n"), t0)
	// The run at 00:10 is judged with what is due before it: 00:05 was
	// missed; the run counts for five's 00:10.
	var got []string
	for _, e := range ev.Started(Run{Tenant: "a", Job: "five", TaskID: "r", At: t0.Add(10 * time.Minute)}) {
		got = append(got, line(e))
	}
	expectLines(t, got, "missed a/five slot=05-01T00:05:00Z at=05-01T00:06:00Z")
	got = nil
	for _, e := range ev.Tick(t0.Add(time.Hour)) {
		got = append(got, line(e))
	}
	slices.Sort(got)
	// five: 00:15 .. 00:55 expected (9); period: 00:05 .. 00:55 (11): the
	// run of five is not a run of period.
	expectLines(t, got,
		"missed a/five slot=05-01T00:55:00Z at=05-01T00:56:00Z count=9",
		"missed a/period slot=05-01T00:55:00Z at=05-01T00:56:00Z count=11")
	// Set from the past: the expected runs since then are judged at the
	// next tick, not forgotten.
	ev.Set("b", mustParse(t, "expectations:\n  - {job: five, schedule: \"*/5 * * * *\", grace: 1m}\n"), t0.Add(50*time.Minute))
	got = nil
	for _, e := range ev.Tick(t0.Add(70 * time.Minute)) {
		got = append(got, line(e))
	}
	slices.Sort(got)
	expectLines(t, got,
		"missed a/five slot=05-01T01:05:00Z at=05-01T01:06:00Z count=2",
		"missed a/period slot=05-01T01:05:00Z at=05-01T01:06:00Z count=2",
		"missed b/five slot=05-01T01:05:00Z at=05-01T01:06:00Z count=3")
}

// TestMissedEarlyStart: a run counts for an expected time when it starts
// up to grace before it, but not closer than half-way to the time before.
func TestMissedEarlyStart(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	s := newSim(t, t0, map[string]string{"a": "expectations:\n  - {job: h, schedule: \"0 * * * *\", grace: 40m}\n"})
	s.start("a", "h", "early", t0.Add(50*time.Minute))       // 10m before 01:00: counts for 01:00
	s.start("a", "h", "too early", t0.Add(85*time.Minute+1)) // 35m before 02:00: past half-way, counts for 01:00 only
	s.until(t0.Add(3*time.Hour), time.Minute)
	expectLines(t, s.take(),
		"missed a/h slot=05-01T02:00:00Z at=05-01T02:40:00Z")
}

func TestTooLong(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: etl, max_runtime: 1h}\n"
	s := newSim(t, t0, map[string]string{"a": src, "b": src})
	s.start("a", "etl", "r1", t0.Add(time.Minute))
	s.start("a", "etl", "r2", t0.Add(2*time.Minute))
	s.start("b", "etl", "r1", t0.Add(time.Minute))
	s.finish("a", "etl", "r2", t0.Add(62*time.Minute-time.Second), apollo.StatusSuccess, time.Hour-time.Second)
	s.finish("b", "etl", "r1", t0.Add(30*time.Minute), apollo.StatusFailed, 29*time.Minute)
	s.until(t0.Add(3*time.Hour), 10*time.Second)
	expectLines(t, s.take(), "too_long a/etl slot=05-01T00:01:00Z at=05-01T01:01:00Z task=r1")
	if got := s.ev.Finished(Run{Tenant: "a", Job: "etl", TaskID: "r1", At: t0.Add(3 * time.Hour), Status: apollo.StatusTimeout}); got != nil {
		t.Errorf("the timeout of a run told too long: %v", got)
	}
}

// max_runtime counts from when the start was received: a start whose
// reporter's clock is an hour behind is not too long at once, and a later
// max_runtime counts from the receipt too. The event still names the
// start the reporter gave.
func TestTooLongCountsFromReceipt(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 1, 0)
	src := "expectations:\n  - {job: etl, max_runtime: 1m}\n"
	ev := NewEvaluator()
	for _, tenant := range []string{"a", "b"} {
		ev.Set(tenant, mustParse(t, src), t0)
		ev.Started(Run{Tenant: tenant, Job: "etl", TaskID: "r1", At: t0.Add(-time.Hour), Received: t0})
	}
	if got := ev.Tick(t0.Add(59 * time.Second)); len(got) > 0 {
		t.Fatalf("a run received 59s ago, with max_runtime 1m, is too long: %v", got)
	}
	ev.Set("b", mustParse(t, "expectations:\n  - {job: etl, max_runtime: 2m}\n"), t0.Add(59*time.Second))
	got := ev.Tick(t0.Add(time.Minute))
	if len(got) != 1 || got[0].Tenant != "a" || got[0].Kind != KindTooLong || !got[0].Slot.Equal(t0.Add(-time.Hour)) || !got[0].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("at 1m: %+v", got)
	}
	if got := ev.Tick(t0.Add(2 * time.Minute)); len(got) != 1 || got[0].Tenant != "b" {
		t.Fatalf("at 2m, the changed max_runtime: %+v", got)
	}
}

func TestTooShort(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: report, min_runtime: 30s}\n"
	s := newSim(t, t0, map[string]string{"a": src, "b": src})
	s.finish("a", "report", "quick", t0.Add(time.Minute), apollo.StatusSuccess, 10*time.Second)
	s.finish("a", "report", "quick-fail", t0.Add(2*time.Minute), apollo.StatusFailed, time.Second)
	s.finish("a", "report", "ok", t0.Add(3*time.Minute), apollo.StatusSuccess, 30*time.Second)
	s.finish("b", "report", "ok", t0.Add(time.Minute), apollo.StatusSuccess, time.Minute)
	s.until(t0.Add(5*time.Minute), 10*time.Second)
	expectLines(t, s.take(), "too_short a/report slot=05-01T00:00:50Z at=05-01T00:01:00Z task=quick")
}

func TestTooOften(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: j, max_runs: 2, runs_window: 1h}\n"
	s := newSim(t, t0, map[string]string{"a": src, "b": src})
	for _, m := range []int{0, 10, 20, 61, 81, 140} {
		s.start("a", "j", fmt.Sprint(m), t0.Add(time.Duration(m)*time.Minute))
	}
	for _, m := range []int{0, 30, 60, 90} { // two per rolling hour, never three
		s.start("b", "j", fmt.Sprint(m), t0.Add(time.Duration(m)*time.Minute))
	}
	s.until(t0.Add(3*time.Hour), time.Minute)
	expectLines(t, s.take(),
		"too_often a/j slot=05-01T00:20:00Z at=05-01T00:20:00Z task=20",
		"too_often a/j slot=05-01T01:01:00Z at=05-01T01:01:00Z task=61")
}

// Starts count for max_runs by when they happened, not the order they
// are told in. Tenant a is told 02:00, then 00:10 (1h50m apart, one per
// hour: not too often; before, the start told last was compared with the
// one told first as if it were the latest, and marked too often). Tenant
// b is told 00:30, then 00:10: two within the hour, one too often.
func TestTooOftenCountsStartsByTime(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	ev := NewEvaluator()
	src := "expectations:\n  - {job: j, max_runs: 1, runs_window: 1h}\n"
	for _, tenant := range []string{"a", "b"} {
		ev.Set(tenant, mustParse(t, src), t0)
	}
	told := map[string][]int{"a": {120, 10}, "b": {30, 10}}
	found := map[string]int{}
	for tenant, minutes := range told {
		for _, m := range minutes {
			for _, e := range ev.Started(Run{Tenant: tenant, Job: "j", TaskID: fmt.Sprint(m), At: t0.Add(time.Duration(m) * time.Minute)}) {
				if e.Kind == KindTooOften {
					found[tenant]++
				}
			}
		}
	}
	if found["a"] != 0 || found["b"] != 1 {
		t.Errorf("too_often: a %d, b %d; want 0 and 1", found["a"], found["b"])
	}
}

func TestFlapping(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: j, flapping: {changes: 4, window: 1h, hold: 30m}}\n"
	s := newSim(t, t0, map[string]string{"a": src, "b": src})
	outcomes := "SFSFSFSSSSSS" + "FSFS"
	for i, c := range outcomes {
		st := apollo.StatusSuccess
		if c == 'F' {
			st = apollo.StatusFailed
		}
		at := t0.Add(time.Duration(i+1) * 10 * time.Minute)
		s.finish("a", "j", fmt.Sprint(i), at, st, time.Second)
		// b fails twice in a row, then stays good: one switch.
		s.finish("b", "j", fmt.Sprint(i), at, map[bool]apollo.Status{true: apollo.StatusFailed, false: apollo.StatusSuccess}[i < 2], time.Second)
	}
	s.until(t0.Add(4*time.Hour), time.Minute)
	// Switches at 00:20, 00:30, 00:40, 00:50: the fourth within the hour
	// starts flapping; those at 01:00 and 01:10 prolong it; stable 30m
	// after the last. Then four switches within an hour again (02:10 ..
	// 02:40). Each flapping names the run that made the job flap.
	expectLines(t, s.take(),
		"flapping a/j slot=05-01T00:50:00Z at=05-01T00:50:00Z task=4",
		"stable a/j slot=05-01T01:10:00Z at=05-01T01:40:00Z",
		"flapping a/j slot=05-01T02:40:00Z at=05-01T02:40:00Z task=15",
		"stable a/j slot=05-01T02:40:00Z at=05-01T03:10:00Z")
	if s.ev.Flapping("a", "j") || s.ev.Flapping("b", "j") {
		t.Error("still flapping at the end")
	}
}

// Runs count for flapping in the order they ended, not the order they
// are told in: the changes of different runs reach the evaluator in no
// set order. Tenant a is told success (00:01), success (00:03), then the
// failure that ended between them (00:02): two switches, flapping, as
// tenant b told in order. Tenant c's failure ended last (00:03): one
// switch, not flapping. Before, a counted one switch and never flapped.
func TestFlappingCountsRunsInTheOrderTheyEnded(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	ev := NewEvaluator()
	src := "expectations:\n  - {job: j, flapping: {changes: 2}}\n"
	for _, tenant := range []string{"a", "b", "c"} {
		ev.Set(tenant, mustParse(t, src), t0)
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	told := map[string][]struct {
		m  int
		st apollo.Status
	}{
		"a": {{1, apollo.StatusSuccess}, {3, apollo.StatusSuccess}, {2, apollo.StatusFailed}},
		"b": {{1, apollo.StatusSuccess}, {2, apollo.StatusFailed}, {3, apollo.StatusSuccess}},
		"c": {{1, apollo.StatusSuccess}, {3, apollo.StatusFailed}, {2, apollo.StatusSuccess}},
	}
	found := map[string][]Event{}
	for tenant, runs := range told {
		for i, r := range runs {
			found[tenant] = append(found[tenant], ev.Finished(Run{Tenant: tenant, Job: "j", TaskID: fmt.Sprint(i), At: at(r.m), Status: r.st})...)
		}
	}
	for tenant, want := range map[string]bool{"a": true, "b": true, "c": false} {
		got := len(found[tenant]) == 1 && found[tenant][0].Kind == KindFlapping
		if got != want || ev.Flapping(tenant, "j") != want {
			t.Errorf("tenant %s: found %v, flapping %v; want flapping %v", tenant, found[tenant], ev.Flapping(tenant, "j"), want)
		}
	}
	// Flapping since the last switch in time: a's at 00:03.
	if e := found["a"]; len(e) == 1 && !e[0].At.Equal(at(3)) {
		t.Errorf("a flapping at %v, want 00:03", e[0].At)
	}
}

func TestFlappingQuery(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	ev := NewEvaluator()
	ev.Set("a", mustParse(t, "expectations:\n  - {job: j, flapping: {changes: 2}}\n"), t0)
	for i, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusSuccess} {
		ev.Finished(Run{Tenant: "a", Job: "j", At: t0.Add(time.Duration(i) * time.Minute), Status: st})
	}
	if !ev.Flapping("a", "j") || ev.Flapping("b", "j") || ev.Flapping("a", "other") {
		t.Error("Flapping answers for the wrong job or tenant")
	}
	// The default hold is the window (1h by default): stable an hour after
	// the last switch, at 01:02.
	if got := ev.Tick(t0.Add(time.Hour + time.Minute)); len(got) != 0 {
		t.Errorf("stable too early: %v", got)
	}
	if got := ev.Tick(t0.Add(time.Hour + 2*time.Minute)); len(got) != 1 || got[0].Kind != KindStable {
		t.Errorf("Tick = %v, want stable", got)
	}
}

// TestInhibition: extract <- transform <- load_a, load_b. While extract
// is down, both loads' alerts are echoes of it, also with transform down
// in between; when extract recovers, transform is the cause.
func TestInhibition(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := `expectations:
  - {job: extract, schedule: "0 2 * * *", grace: 10m}
  - {job: transform, upstream: [extract], max_runtime: 1h}
  - {job: load_a, upstream: [transform]}
  - {job: load_b, upstream: [transform, lookup]}
`
	s := newSim(t, t0, map[string]string{"a": src, "b": src})
	s.start("b", "extract", "e0", utc(2026, 5, 1, 2, 0))
	causes := func(tenant, job string) string {
		var parts []string
		for _, c := range s.ev.InhibitedBy(tenant, job) {
			parts = append(parts, fmt.Sprintf("%s since %s", c, c.Since.UTC().Format("15:04")))
		}
		return strings.Join(parts, ", ")
	}
	check := func(when string, want map[string]string) {
		t.Helper()
		for _, job := range []string{"extract", "transform", "load_a", "load_b", "lookup"} {
			if got := causes("a", job); got != want[job] {
				t.Errorf("%s: a/%s inhibited by %q, want %q", when, job, got, want[job])
			}
			if got := causes("b", job); got != "" {
				t.Errorf("%s: b/%s inhibited by %q: tenant b is healthy", when, job, got)
			}
		}
	}
	check("at start", nil)

	s.until(utc(2026, 5, 1, 2, 10), time.Minute) // extract missed its 02:00 run
	check("extract missed", map[string]string{"transform": "extract (missed) since 02:10", "load_a": "extract (missed) since 02:10", "load_b": "extract (missed) since 02:10"})

	s.start("a", "transform", "t1", utc(2026, 5, 1, 2, 15))
	s.until(utc(2026, 5, 1, 3, 15), time.Minute) // transform runs past max_runtime
	check("both down", map[string]string{"transform": "extract (missed) since 02:10", "load_a": "extract (missed) since 02:10", "load_b": "extract (missed) since 02:10"})

	s.finish("a", "lookup", "l1", utc(2026, 5, 1, 3, 20), apollo.StatusFailed, time.Minute)
	s.finish("a", "extract", "e1", utc(2026, 5, 1, 3, 30), apollo.StatusSuccess, time.Minute)
	s.until(utc(2026, 5, 1, 3, 30), time.Minute)
	check("extract back", map[string]string{"load_a": "transform (timeout) since 03:15", "load_b": "lookup (failed) since 03:20, transform (timeout) since 03:15"})

	s.finish("a", "transform", "t2", utc(2026, 5, 1, 3, 40), apollo.StatusSuccess, time.Minute)
	s.finish("a", "lookup", "l2", utc(2026, 5, 1, 3, 40), apollo.StatusSuccess, time.Minute)
	s.until(utc(2026, 5, 1, 3, 40), time.Minute)
	check("all back", nil)
}

func TestRootCausesDiamond(t *testing.T) {
	t.Parallel()
	up := map[string][]string{"x": {"b", "c"}, "b": {"a"}, "c": {"a", "d"}, "d": {"x"}} // d -> x -> c -> d is a cycle: the walk still ends
	downSet := map[string]bool{"a": true, "c": true, "d": true}
	got := rootCauses("x", func(n string) []string { return up[n] }, func(n string) bool { return downSet[n] })
	if !slices.Equal(got, []string{"a"}) && !slices.Equal(got, []string{"a", "d"}) {
		t.Errorf("rootCauses = %v", got)
	}
	if got := rootCauses("b", func(n string) []string { return up[n] }, func(n string) bool { return downSet[n] }); !slices.Equal(got, []string{"a"}) {
		t.Errorf("rootCauses(b) = %v, want [a]", got)
	}
	if got := rootCauses("a", func(n string) []string { return up[n] }, func(n string) bool { return true }); got != nil {
		t.Errorf("rootCauses(a) = %v: a has no upstream", got)
	}
}

// TestSetKeepsState: setting the same expectations again changes nothing;
// a changed schedule waits for its first run after since; a removed
// flapping job is told stable.
func TestSetKeepsState(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: j, schedule: \"0 * * * *\", grace: 5m, flapping: {changes: 2}}\n"
	s := newSim(t, t0, map[string]string{"a": src})
	s.until(t0.Add(30*time.Minute), time.Minute)
	if evs := s.ev.Set("a", mustParse(t, src), s.clock.Now()); evs != nil {
		t.Errorf("Set again = %v", evs)
	}
	s.until(t0.Add(70*time.Minute), time.Minute)
	expectLines(t, s.take(), "missed a/j slot=05-01T01:00:00Z at=05-01T01:05:00Z")

	// Moving the schedule to :30 at 01:10 expects the next run at 01:30.
	s.ev.Set("a", mustParse(t, strings.Replace(src, "0 * * * *", "30 * * * *", 1)), s.clock.Now())
	s.until(t0.Add(100*time.Minute), time.Minute)
	expectLines(t, s.take(), "missed a/j slot=05-01T01:30:00Z at=05-01T01:35:00Z")

	for i, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusSuccess} {
		s.ev.Finished(Run{Tenant: "a", Job: "j", At: s.clock.Now().Add(time.Duration(i) * time.Second), Status: st})
	}
	if !s.ev.Flapping("a", "j") {
		t.Fatal("not flapping")
	}
	var got []string
	for _, e := range s.ev.Set("a", nil, s.clock.Now()) {
		got = append(got, line(e)+" "+e.Detail)
	}
	expectLines(t, got, "stable a/j slot=05-01T01:40:02Z at=05-01T01:40:00Z no expectation any more")
	if s.ev.deadlines() != 0 {
		t.Errorf("%d deadlines left after removing every expectation", s.ev.deadlines())
	}
	s.until(t0.Add(5*time.Hour), time.Minute)
	expectLines(t, s.take())
}

// TestUnwatchedJobs: runs of jobs without an expectation, and of unknown
// tenants, change nothing and return nothing.
func TestUnwatchedJobs(t *testing.T) {
	t.Parallel()
	ev := NewEvaluator()
	ev.Set("a", mustParse(t, "expectations:\n  - {job: j, max_runs: 1, runs_window: 1h, min_runtime: 1m}\n"), utc(2026, 1, 1, 0, 0))
	for _, r := range []Run{{Tenant: "a", Job: "other"}, {Tenant: "b", Job: "j"}} {
		for range 3 {
			r.At = utc(2026, 1, 1, 0, 1)
			r.Status = apollo.StatusSuccess
			if evs := append(ev.Started(r), ev.Finished(r)...); evs != nil {
				t.Errorf("%+v: %v", r, evs)
			}
		}
	}
	if got := ev.InhibitedBy("nobody", "j"); got != nil {
		t.Errorf("InhibitedBy(unknown tenant) = %v", got)
	}
}

// FuzzEvaluator drives an evaluator with arbitrary starts, ends, ticks and
// reloads, in time order, and checks what must always hold: each missed
// event is about a later expected run than the one before it for its job;
// events name only watched jobs; and the heap holds no more deadlines
// than there are jobs (slot and stable) and watched runs.
func FuzzEvaluator(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, again and again"))
	src := []string{
		"expectations:\n  - {job: a, schedule: \"*/5 * * * *\", grace: 1m, max_runtime: 7m, min_runtime: 30s, max_runs: 2, runs_window: 5m, flapping: {changes: 2, window: 20m, hold: 5m}}\n  - {job: b, every: 3m, grace: 30s, upstream: [a], max_runtime: 2m}\n",
		"expectations:\n  - {job: a, schedule: \"30 2 * * *\", timezone: Europe/Berlin, grace: 0}\n  - {job: c, every: 1h, upstream: [b]}\n",
	}
	var sets []*Set
	for _, s := range src {
		set, err := Parse("f.yaml", []byte(s))
		if err != nil {
			f.Fatal(err)
		}
		sets = append(sets, set)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		ev := NewEvaluator()
		now := time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC)
		ev.Set("t", sets[0], now)
		lastSlot := map[string]time.Time{}
		jobs := []string{"a", "b", "c", "x"}
		check := func(evs []Event) {
			for _, e := range evs {
				if e.Tenant != "t" || e.Job == "x" || e.Count < 1 {
					t.Fatalf("event %+v", e)
				}
				if e.Kind == KindMissed {
					if !e.Slot.After(lastSlot[e.Job]) {
						t.Fatalf("missed %s at %v after one at %v", e.Job, e.Slot, lastSlot[e.Job])
					}
					lastSlot[e.Job] = e.Slot
				}
			}
		}
		for i, op := range ops {
			now = now.Add(time.Duration(op%16) * 97 * time.Second)
			r := Run{Tenant: "t", Job: jobs[int(op>>4)%len(jobs)], TaskID: fmt.Sprint(i % 5), At: now}
			switch op >> 6 {
			case 0:
				check(ev.Started(r))
			case 1:
				r.Status, r.Duration = []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout, apollo.StatusManualBlocked}[op%4], time.Duration(op)*time.Second
				check(ev.Finished(r))
			case 2:
				check(ev.Tick(now))
			default:
				if op%7 == 0 {
					ev.Set("t", sets[int(op)%len(sets)], now)
					lastSlot = map[string]time.Time{} // a new expectation starts over
				}
				ev.InhibitedBy("t", r.Job)
			}
			runs := 0
			for _, j := range ev.tenants["t"].jobs {
				runs += len(j.runs)
			}
			if ev.deadlines() > 2*len(ev.tenants["t"].jobs)+runs {
				t.Fatalf("%d deadlines for %d jobs and %d runs", ev.deadlines(), len(ev.tenants["t"].jobs), runs)
			}
		}
	})
}

// TestHourlyAcrossTheSpringGap: an hourly job (hour field "*") runs every
// hour of real time, as classic cron runs it: on the night Berlin jumps
// from 02:00 to 03:00 there is no 02:30, and the job that ran at 01:30 CET
// runs next at 03:30 CEST, one hour later. Nothing is missed, and no run
// is expected at 03:00, the instant of the change (a fixed-hour job's
// rule). Tenant b's job never runs: it misses exactly the hours a's ran.
func TestHourlyAcrossTheSpringGap(t *testing.T) {
	t.Parallel()
	const hourly = "expectations:\n  - {job: sync, schedule: \"30 * * * *\", timezone: Europe/Berlin, grace: 10m}\n"
	s := newSim(t, utc(2026, 3, 28, 23, 0), map[string]string{"a": hourly, "b": hourly})
	var want []string
	for at := utc(2026, 3, 28, 23, 30); at.Before(utc(2026, 3, 29, 3, 0)); at = at.Add(time.Hour) {
		s.start("a", "sync", at.Format("1504"), at)
		want = append(want, fmt.Sprintf("missed b/sync slot=%s at=%s", at.Format("01-02T15:04:05Z"), at.Add(10*time.Minute).Format("01-02T15:04:05Z")))
	}
	s.until(utc(2026, 3, 29, 3, 0), time.Minute)
	expectLines(t, s.take(), want...)
}

// An hour field of a step over every hour ("*/2") is every hour's as
// well, as classic cron reads any hour field that starts with "*": such a
// job runs in real time across a DST change, not once at a spring-forward
// change for the hour the gap skips. `0 */2 * * *` in Europe/Berlin on
// 2026-03-29 runs at 00:00 CET (23:00Z), not at 02:00, which does not
// exist, and next at 04:00 CEST (02:00Z). It was expected at the change
// (01:00Z) too: every cron daemon's two-hourly job got a false missed run
// each spring. Two tenants: a reports the runs cron makes, b none.
func TestTwoHourlyAcrossTheSpringGap(t *testing.T) {
	t.Parallel()
	const twoHourly = "expectations:\n  - {job: sync, schedule: \"0 */2 * * *\", timezone: Europe/Berlin, grace: 10m}\n"
	s := newSim(t, utc(2026, 3, 28, 22, 30), map[string]string{"a": twoHourly, "b": twoHourly})
	var want []string
	for _, at := range []time.Time{utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 2, 0), utc(2026, 3, 29, 4, 0)} {
		s.start("a", "sync", at.Format("1504"), at)
		want = append(want, fmt.Sprintf("missed b/sync slot=%s at=%s", at.Format("01-02T15:04:05Z"), at.Add(10*time.Minute).Format("01-02T15:04:05Z")))
	}
	s.until(utc(2026, 3, 29, 5, 0), time.Minute)
	expectLines(t, s.take(), want...)
}
