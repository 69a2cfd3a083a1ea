package expect

import (
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// TestSkippedIsNotMissed: a run a scheduler skipped on purpose and said
// so (manual_blocked) settles its expected run, with a schedule or every,
// so the skip is not told again as a missed run; it is no start: it does
// not count for too_often, does not count for the next expected run, and
// leaves a job that is down down. Tenant b, without the skips, misses.
func TestSkippedIsNotMissed(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := `expectations:
  - {job: five, schedule: "*/5 * * * *", grace: 1m, max_runs: 1, runs_window: 4m}
  - {job: period, every: 5m, grace: 1m}
  - {job: below, upstream: [five]}
`
	s := newSim(t, t0, map[string]string{"a": src, "b": src})
	at := func(min, sec int) time.Time {
		return t0.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second)
	}
	for _, tn := range []string{"a", "b"} {
		s.finish(tn, "five", "f0", at(0, 2), apollo.StatusFailed, time.Second)
		s.start(tn, "period", "p0", at(0, 0))
	}
	s.skip("a", "five", "f5", at(5, 1))  // its 00:05 run
	s.skip("a", "five", "f9", at(9, 30)) // before its 00:10 run, within grace
	s.start("a", "five", "f10", at(10, 40))
	s.skip("a", "period", "p5", at(5, 0)) // the next period counts from here
	s.until(at(16, 0), 10*time.Second)
	expectLines(t, s.take(),
		"missed b/five slot=05-01T00:05:00Z at=05-01T00:06:00Z",
		"missed b/period slot=05-01T00:05:00Z at=05-01T00:06:00Z",
		"missed a/period slot=05-01T00:10:00Z at=05-01T00:11:00Z",
		"missed b/five slot=05-01T00:10:00Z at=05-01T00:11:00Z",
		"missed b/period slot=05-01T00:10:00Z at=05-01T00:11:00Z",
		// The skip at 00:09:30 counted for 00:10 (and with the start at
		// 00:10:40 is not a run too often); nothing counts for 00:15.
		"missed a/five slot=05-01T00:15:00Z at=05-01T00:16:00Z",
		"missed a/period slot=05-01T00:15:00Z at=05-01T00:16:00Z",
		"missed b/five slot=05-01T00:15:00Z at=05-01T00:16:00Z",
		"missed b/period slot=05-01T00:15:00Z at=05-01T00:16:00Z",
	)
	if got := s.ev.InhibitedBy("a", "below"); len(got) != 1 || got[0].Job != "five" {
		t.Errorf("a/below inhibited by %v: five failed, then only skipped and missed, and is still down", got)
	}
}

// TestSkipOnTheNextTick: a scheduler that runs every minute with a grace
// of a minute skips its next run exactly when the grace of the one it
// started ends; the skip counts for the next as well, as a start there
// would, and not only for the expected run already counted.
func TestSkipOnTheNextTick(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	s := newSim(t, t0, map[string]string{"a": "expectations:\n  - {job: m, schedule: \"* * * * *\", grace: 1m}\n"})
	s.start("a", "m", "r0", t0)
	s.skip("a", "m", "r1", t0.Add(time.Minute))
	s.skip("a", "m", "r2", t0.Add(2*time.Minute))
	s.until(t0.Add(4*time.Minute+30*time.Second), 10*time.Second)
	expectLines(t, s.take(), "missed a/m slot=05-01T00:03:00Z at=05-01T00:04:00Z")
}
