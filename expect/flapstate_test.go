package expect

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// A job's flapping state, copied out of one evaluator (through JSON, as
// the server's snapshot keeps it) and put back into another that has the
// same expectations, counts as if the runs had been told to it: the run
// after it makes the job flap, per tenant. A job whose flapping settings
// differ in the new evaluator starts its count anew; one flapping when
// copied is still flapping, and stable after its hold.
func TestFlapStatesRestore(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: j, flapping: {changes: 2, window: 1h}}\n  - {job: on, flapping: {changes: 2, window: 1h, hold: 30m}}\n"
	other := "expectations:\n  - {job: j, flapping: {changes: 3, window: 1h}}\n  - {job: on, flapping: {changes: 2, window: 1h, hold: 30m}}\n"
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	before := NewEvaluator()
	for _, tenant := range []string{"a", "b"} {
		before.Set(tenant, mustParse(t, src), t0)
		for i, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed} {
			before.Finished(Run{Tenant: tenant, Job: "j", TaskID: fmt.Sprint(i), At: at(i + 1), Status: st})
		}
		for i, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusSuccess} {
			before.Finished(Run{Tenant: tenant, Job: "on", TaskID: fmt.Sprint(i), At: at(i + 1), Status: st})
		}
	}
	b, err := json.Marshal(before.FlapStates())
	if err != nil {
		t.Fatal(err)
	}
	var states []FlapState
	if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	after := NewEvaluator()
	after.Set("a", mustParse(t, src), t0)
	after.Set("b", mustParse(t, other), t0) // j: other settings
	after.RestoreFlaps(states)
	for tenant, want := range map[string]bool{"a": true, "b": false} {
		got := after.Finished(Run{Tenant: tenant, Job: "j", TaskID: "2", At: at(3), Status: apollo.StatusSuccess})
		if flapped := len(got) == 1 && got[0].Kind == KindFlapping && got[0].TaskID == "2"; flapped != want {
			t.Errorf("tenant %s: the third run found %v, want flapping %v", tenant, got, want)
		}
		if !after.Flapping(tenant, "on") {
			t.Errorf("tenant %s: the job flapping when copied is not flapping", tenant)
		}
	}
	if got := after.Tick(at(3 + 30)); len(got) != 2 || got[0].Kind != KindStable || got[1].Kind != KindStable {
		t.Errorf("Tick 30m after the last switch = %v, want both tenants' job on stable", got)
	}
}

// Runs that end in the same millisecond count for flapping in the order
// of their Seq (the server's: the order it accepted their ends in), not
// the order they are told in, per tenant; the order holds across a copy
// of the state (FlapStates, through JSON, RestoreFlaps). Tenants a and b
// are told a success, then a failure and a success that ended in the same
// millisecond, in Seq order (a) and the other way round (b): both are
// success, failure, success, two switches, flapping. Before, b counted
// them as told, success, success, failure: one switch, not flapping.
func TestFlappingOrdersRunsOfOneMillisecondBySeq(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 5, 1, 0, 0)
	src := "expectations:\n  - {job: j, flapping: {changes: 2, window: 1h}}\n"
	tie := t0.Add(time.Minute)
	type told struct {
		seq uint64
		at  time.Time
		st  apollo.Status
	}
	ok1, failed, ok2 := told{1, t0, apollo.StatusSuccess}, told{2, tie, apollo.StatusFailed}, told{3, tie, apollo.StatusSuccess}
	runs := map[string][]told{"a": {ok1, failed, ok2}, "b": {ok1, ok2, failed}}
	ev := NewEvaluator()
	for tenant, rs := range runs {
		ev.Set(tenant, mustParse(t, src), t0)
		var found []Event
		for _, r := range rs {
			found = append(found, ev.Finished(Run{Tenant: tenant, Job: "j", TaskID: fmt.Sprint(r.seq), At: r.at, Status: r.st, Seq: r.seq})...)
		}
		if len(found) != 1 || found[0].Kind != KindFlapping || !found[0].Slot.Equal(tie) {
			t.Errorf("tenant %s: found %v, want flapping since %v", tenant, found, tie)
		}
	}
	// Copied with their Seq: a failure of the same millisecond told after
	// the copy, earlier by Seq than the last success, is counted before it.
	src = "expectations:\n  - {job: j, flapping: {changes: 3, window: 1h}}\n"
	before := NewEvaluator()
	for tenant := range runs {
		before.Set(tenant, mustParse(t, src), t0)
		for _, r := range []told{ok1, ok2} {
			before.Finished(Run{Tenant: tenant, Job: "j", TaskID: fmt.Sprint(r.seq), At: r.at, Status: r.st, Seq: r.seq})
		}
	}
	b, err := json.Marshal(before.FlapStates())
	if err != nil {
		t.Fatal(err)
	}
	var states []FlapState
	if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	after := NewEvaluator()
	for tenant := range runs {
		after.Set(tenant, mustParse(t, src), t0)
	}
	after.RestoreFlaps(states)
	for tenant := range runs {
		after.Finished(Run{Tenant: tenant, Job: "j", TaskID: "2", At: tie, Status: apollo.StatusFailed, Seq: 2})
		// success, failure, success, failure: three switches.
		got := after.Finished(Run{Tenant: tenant, Job: "j", TaskID: "4", At: tie.Add(time.Millisecond), Status: apollo.StatusFailed, Seq: 4})
		if len(got) != 1 || got[0].Kind != KindFlapping {
			t.Errorf("tenant %s after the copy: found %v, want flapping", tenant, got)
		}
	}
}
