package expect

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// What the evaluator knows of each job that the runs after a snapshot do
// not give again, copied out of one evaluator (through JSON, as the
// server's snapshot keeps it) and put back into another that has the
// same expectations, counts as if the runs had been told to it, per
// tenant: the starts max_runs counts (the start after them is too
// often), whether a job is down (it still holds its downstream job's
// alerts), its latest start. A job whose max_runs or runs_window differ
// in the new evaluator counts its starts anew; it is still down.
func TestJobStatesRestore(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: busy, max_runs: 2, runs_window: 1h}\n  - {job: load, upstream: [extract]}\n"
	other := "expectations:\n  - {job: busy, max_runs: 2, runs_window: 2h}\n  - {job: load, upstream: [extract]}\n"
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	before := NewEvaluator()
	for _, tenant := range []string{"a", "b"} {
		before.Set(tenant, mustParse(t, src), t0)
		for i := range 2 {
			if got := before.Started(Run{Tenant: tenant, Job: "busy", TaskID: fmt.Sprint(i), At: at(i + 1)}); len(got) != 0 {
				t.Fatalf("tenant %s: start %d found %v", tenant, i, got)
			}
		}
		before.Started(Run{Tenant: tenant, Job: "extract", TaskID: "x", At: at(1)})
		before.Finished(Run{Tenant: tenant, Job: "extract", TaskID: "x", At: at(2), Status: apollo.StatusFailed})
	}
	b, err := json.Marshal(before.JobStates())
	if err != nil {
		t.Fatal(err)
	}
	var states []JobState
	if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	after := NewEvaluator()
	after.Set("a", mustParse(t, src), t0)
	after.Set("b", mustParse(t, other), t0) // busy: another runs_window
	after.RestoreJobs(states)
	for tenant, want := range map[string]bool{"a": true, "b": false} {
		got := after.Started(Run{Tenant: tenant, Job: "busy", TaskID: "2", At: at(3)})
		if often := len(got) == 1 && got[0].Kind == KindTooOften && got[0].TaskID == "2"; often != want {
			t.Errorf("tenant %s: the third start found %v, want too_often %v", tenant, got, want)
		}
		causes := after.InhibitedBy(tenant, "load")
		if len(causes) != 1 || causes[0].Job != "extract" || causes[0].Problem != ProblemFailed || !causes[0].Since.Equal(at(2)) {
			t.Errorf("tenant %s: load held by %v, want extract, failed since %v", tenant, causes, at(2))
		}
	}
	// The latest start is kept: a later run's success clears the state
	// as it would have, an earlier one's too.
	after.Finished(Run{Tenant: "a", Job: "extract", TaskID: "y", At: at(4), Status: apollo.StatusSuccess})
	if got := after.InhibitedBy("a", "load"); len(got) != 0 {
		t.Errorf("tenant a: load held by %v after extract succeeded", got)
	}
	if i := slices.IndexFunc(states, func(s JobState) bool { return s.Tenant == "a" && s.Job == "extract" }); i < 0 || !states[i].LastStart.Equal(at(1)) {
		t.Errorf("the states kept no latest start of a's extract at %v: %+v", at(1), states)
	}
}

// The runs watched for max_runtime, copied out of one evaluator (through
// JSON) and put back into another with the same expectations, are found
// too long when they pass it, once each, per tenant: one still running
// at its deadline, and one found too long before the copy that the caller
// had not timed out yet. A run whose end is told after the restore is
// not; a tenant whose job has no max_runtime now watches none. Before,
// JobStates kept no run, and a run started before a snapshot was never
// found too long after a restart from it.
func TestWatchedRunsRestore(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: slow, max_runtime: 10m}\n"
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	before := NewEvaluator()
	tenants := []string{"a", "b", "c"}
	for _, tenant := range tenants {
		before.Set(tenant, mustParse(t, src), t0)
		for i, id := range []string{"early", "late", "ends"} {
			// Received a minute after their reported start: max_runtime
			// counts from then.
			before.Started(Run{Tenant: tenant, Job: "slow", TaskID: id, At: at(i), Received: at(i * 10).Add(time.Minute)})
		}
	}
	if got := before.Tick(at(12)); len(got) != len(tenants) {
		t.Fatalf("before the copy: %v, want early too long in each tenant", got)
	}
	b, err := json.Marshal(before.JobStates())
	if err != nil {
		t.Fatal(err)
	}
	var states []JobState
	if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	after := NewEvaluator()
	after.Set("a", mustParse(t, src), at(12))
	after.Set("b", mustParse(t, src), at(12))
	after.Set("c", mustParse(t, "expectations:\n  - {job: slow, min_runtime: 1s}\n"), at(12))
	after.RestoreJobs(states)
	for _, tenant := range []string{"a", "b"} {
		after.Finished(Run{Tenant: tenant, Job: "slow", TaskID: "ends", At: at(15), Status: apollo.StatusSuccess, Duration: 13 * time.Minute})
	}
	var found []string
	for _, m := range []int{12, 20, 21, 40} {
		for _, ev := range after.Tick(at(m)) {
			if ev.Kind != KindTooLong {
				t.Fatalf("at %v: %v", at(m), ev)
			}
			found = append(found, fmt.Sprintf("%s %s %d %v", ev.Tenant, ev.TaskID, m, ev.Slot.Sub(t0)))
		}
	}
	slices.Sort(found)
	want := []string{"a early 12 0s", "a late 21 1m0s", "b early 12 0s", "b late 21 1m0s"}
	if !slices.Equal(found, want) {
		t.Errorf("after the restore found %q, want %q", found, want)
	}
}
