package expect

import (
	"strings"
	"testing"
	"time"
)

// Judging a long downtime (or expectations set from long ago) costs a
// bounded number of steps of a schedule, and says that it counted at
// least so many. Before, every expected run in between was stepped one
// by one under the evaluator's lock, a memo entry each: a job expected
// every second, after 30 days down, took 2.6 million steps (about 40 s
// on a 2-core machine, a few hundred MB of memo), while every run's start
// and end on the bus waited for the lock. Two tenants, each its own.
func TestLongDowntimeIsJudgedInBoundedSteps(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	set, err := NewSet([]Expectation{{Job: "each_second", Schedule: "* * * * * *", Grace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvaluator()
	for _, tenant := range []string{"acme", "zeta"} {
		ev.Set(tenant, set, now.Add(-30*24*time.Hour))
	}
	evs := ev.Tick(now)
	if ev.memoLen() > 2*maxSlotSteps {
		t.Errorf("%d schedule steps memoized for one tick, want at most %d", ev.memoLen(), 2*maxSlotSteps)
	}
	if len(evs) != 2 {
		t.Fatalf("want one missed event per tenant: %+v", evs)
	}
	for _, e := range evs {
		if e.Kind != KindMissed || !e.Slot.Equal(now.Add(-time.Second)) || e.Count <= maxSlotSteps ||
			!strings.HasPrefix(e.Detail, "at least ") {
			t.Errorf("tenant %s: %v at %s, count %d: %s", e.Tenant, e.Kind, e.Slot, e.Count, e.Detail)
		}
	}
	// The next tick judges the runs expected since, one by one again.
	evs = ev.Tick(now.Add(10 * time.Second))
	if len(evs) != 2 {
		t.Fatalf("the next tick: %+v", evs)
	}
	for _, e := range evs {
		if e.Count != 10 || !e.Slot.Equal(now.Add(9*time.Second)) || strings.HasPrefix(e.Detail, "at least") {
			t.Errorf("tenant %s, the next tick: count %d, last %s: %s", e.Tenant, e.Count, e.Slot, e.Detail)
		}
	}
}

// At the bound, a job with no expected run after the one it stopped at
// is counted exactly.
func TestDowntimeJustPastTheBoundIsCountedExactly(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	set, err := NewSet([]Expectation{{Job: "each_second", Schedule: "* * * * * *", Grace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvaluator()
	for _, tenant := range []string{"acme", "zeta"} {
		// Due: since+1s up to now-1s, one more than the bound.
		ev.Set(tenant, set, now.Add(-time.Duration(maxSlotSteps+2)*time.Second))
	}
	evs := ev.Tick(now)
	if len(evs) != 2 {
		t.Fatalf("%+v", evs)
	}
	for _, e := range evs {
		if e.Count != maxSlotSteps+1 || !e.Slot.Equal(now.Add(-time.Second)) || strings.HasPrefix(e.Detail, "at least") {
			t.Errorf("tenant %s: count %d, last %s: %s", e.Tenant, e.Count, e.Slot, e.Detail)
		}
	}
}

// Many jobs of one schedule down for long share the search for the last
// expected run, as they share each step.
func TestLongDowntimeOfManyJobsOfOneSchedule(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var exps []Expectation
	for i := range 200 {
		exps = append(exps, Expectation{Job: "j" + strings.Repeat("x", i), Schedule: "* * * * * *", Grace: time.Second})
	}
	set, err := NewSet(exps)
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvaluator()
	for _, tenant := range []string{"acme", "zeta"} {
		ev.Set(tenant, set, now.Add(-24*time.Hour))
	}
	evs := ev.Tick(now)
	if len(evs) != 400 {
		t.Fatalf("%d events, want one per job of each tenant", len(evs))
	}
	for _, e := range evs {
		if !e.Slot.Equal(now.Add(-time.Second)) || !strings.HasPrefix(e.Detail, "at least ") {
			t.Fatalf("tenant %s, job %s: last %s: %s", e.Tenant, e.Job, e.Slot, e.Detail)
		}
	}
	if ev.memoLen() > 2*maxSlotSteps {
		t.Errorf("%d schedule steps memoized, want at most %d", ev.memoLen(), 2*maxSlotSteps)
	}
}
