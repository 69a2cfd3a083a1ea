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
