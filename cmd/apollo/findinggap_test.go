package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/expect"
)

// holdFindings writes a file named after each run found too short, too
// often or making its job flap (in dir) as the expectations queue the finding, and
// holds for good the loop that would act on it: the process is killed
// between the finding and its mark.
type holdFindings string

func (h holdFindings) see(evs []expect.Event, acting bool) {
	held := false
	for _, ev := range evs {
		if ev.Kind != expect.KindTooShort && ev.Kind != expect.KindTooOften && ev.Kind != expect.KindFlapping {
			continue
		}
		held = true
		if !acting {
			os.WriteFile(filepath.Join(string(h), ev.Tenant+"_"+ev.TaskID), nil, 0o600)
		}
	}
	if held && acting {
		select {}
	}
}

// A run found too short just before a kill -9, before the finding was
// marked on the run, is marked and told after the restart, once, in each
// tenant and in every mode; another kill -9 after it was told does not
// tell it again. Before, the replay rebuilt the evaluator's state but
// dropped what it found, and the finding was lost for good.
func TestTooShortFoundJustBeforeAKillIsTold(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		findingHeldBeforeTheKillIsToldOnce(t, d, h, "too_short", "quick", "min_runtime: 1h",
			d.succeedQuick, d.tooShortMarkedOnce)
	})
}

// succeedQuick reports the run quick-TENANT of job, a success in 1 ms.
func (d *deployment) succeedQuick(tenant, job string) { d.succeed(tenant, job, "quick-"+tenant) }

// tooShortMarkedOnce checks that the run of succeedQuick has one
// too_short mark.
func (d *deployment) tooShortMarkedOnce(tenant, _ string) {
	d.t.Helper()
	var task apollo.Task
	d.do(tenant, "GET", "/api/v1/tasks/quick-"+tenant, "", &task, 200)
	if n := countMarks(task, apollo.KindTooShort, "1h"); task.Status != apollo.StatusSuccess || n != 1 {
		d.t.Fatalf("tenant %s: the run is %s with %d too_short marks, want success marked once: %+v", tenant, task.Status, n, task.History)
	}
}

// A job found flapping just before a kill -9, before the finding was
// marked on the run that made it flap, is marked and told after the
// restart, once, in each tenant and in every mode; another kill -9 after
// it was told does not tell it again. Before, flapping was told from
// memory alone (to the engine, or on a Redis channel) and the replay
// dropped what it found: it was lost for good.
func TestFlappingFoundJustBeforeAKillIsTold(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		findingHeldBeforeTheKillIsToldOnce(t, d, h, "flapping", "flappy", "flapping: {changes: 2, window: 1h}",
			func(tenant, job string) {
				d.succeedThenFail(tenant, job)
				d.endedRun(tenant, job, job+"-ok-2", apollo.StatusSuccess)
			},
			d.flappingMarkedOnce)
	})
}

// succeedThenFail reports the runs JOB-ok-1, a success, and JOB-failed,
// ended in that order: one switch between success and failure.
func (d *deployment) succeedThenFail(tenant, job string) {
	d.t.Helper()
	d.endedRun(tenant, job, job+"-ok-1", apollo.StatusSuccess)
	d.endedRun(tenant, job, job+"-failed", apollo.StatusFailed)
}

// endedRun reports a run of job that starts and ends as st, ended after
// every run reported before it, a minute ago. In the past: the server
// takes a run's times as no later than it received them, and runAt's
// were once ahead of the clock, which then ended two runs in the same
// millisecond (TestFlappingFoundJustBeforeAKillIsTold failed so about
// one run in four). runAt keeps behind the clock now, and runs of one
// millisecond count in the log's order (docs/expectations.md#flapping);
// the minute stays, a margin that costs nothing.
func (d *deployment) endedRun(tenant, job, id string, st apollo.Status) {
	d.t.Helper()
	start, end := d.runAt()
	start, end = start-time.Minute.Milliseconds(), end-time.Minute.Milliseconds()
	d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(
		`[{"taskID":%[1]q,"name":%[2]q,"sequence":1,"status":"running","ts":%[3]d},{"taskID":%[1]q,"sequence":2,"status":%[5]q,"ts":%[4]d}]`,
		id, job, start, end, st), nil, 200)
}

// flappingMarkedOnce checks that one of the runs of succeedThenFail and
// JOB-ok-2 (endedRun) has a flapping mark, and no other: the one whose end the
// replay, which decides tasks in parallel, found it at.
func (d *deployment) flappingMarkedOnce(tenant, job string) {
	d.t.Helper()
	marks := 0
	for _, run := range []string{"ok-1", "failed", "ok-2"} {
		var task apollo.Task
		d.do(tenant, "GET", "/api/v1/tasks/"+job+"-"+run, "", &task, 200)
		marks += countMarks(task, apollo.KindFlapping, "2 switches")
	}
	if marks != 1 {
		d.t.Fatalf("tenant %s: %d flapping marks on the job's runs, want one", tenant, marks)
	}
}

// findingHeldBeforeTheKillIsToldOnce is heldFinding's toldOnce, with no
// checkpoint in the way.
func findingHeldBeforeTheKillIsToldOnce(t *testing.T, d *deployment, h *hook, on, job, exp string,
	report func(tenant, job string), checked func(tenant, job string)) {
	heldFinding{on: on, job: job, exp: exp, report: report, checked: checked}.toldOnce(t, d, h)
}

// heldFinding is a finding held before its mark and killed: the rule
// TENANT_on over the job TENANT_job, expected as exp says; before (if
// set) reports runs before a checkpoint, and the server is killed after
// it; report reports the runs that make the finding; checkpoint waits for
// a checkpoint after the findings are held, before the kill; checked
// checks it marked on the runs.
type heldFinding struct {
	on, job, exp   string
	before, report func(tenant, job string)
	checkpoint     bool
	checked        func(tenant, job string)
}

// toldOnce gives each tenant the rule and a sentinel rule, starts the
// server holding every finding before its mark, reports the runs, kills
// every process once both tenants' findings are held, and expects the
// finding told once per tenant after the restart, and not again after
// another kill -9.
func (f heldFinding) toldOnce(t *testing.T, d *deployment, h *hook) {
	want := map[string]string{}
	for _, tenant := range tenants {
		want[tenant] = tenant + "_" + f.on
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_%[2]s task_prefix: "%[1]s_%[3]s" ON: %[2]s GROUP_WINDOW: 1s NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant, f.on, f.job), nil, 200)
		d.putExpectations(tenant, fmt.Sprintf("expectations:\n  - job: %s_%s\n    %s\n", tenant, f.job, f.exp))
	}
	if f.before != nil {
		for _, tenant := range tenants {
			f.before(tenant, tenant+"_"+f.job)
		}
		d.awaitCheckpoint() // the next start has these runs from the snapshot alone
	}
	dir := t.TempDir()
	d.env = []string{"APOLLO_TEST_HOLD_FINDINGS=" + dir}
	d.crash() // this start holds the findings
	for _, tenant := range tenants {
		f.report(tenant, tenant+"_"+f.job)
	}
	eventually(t, 30*time.Second, "both findings held before their marks", func() bool {
		files, _ := os.ReadDir(dir)
		return len(files) == len(tenants)
	})
	if f.checkpoint {
		d.awaitCheckpoint() // the runs of the findings are in the snapshot
	}
	d.env = nil
	d.crash()
	awaitTenants(t, h, "firing", want)
	for _, tenant := range tenants {
		f.checked(tenant, tenant+"_"+f.job)
	}
	d.awaitResolvedPastDedup(want)
	d.crash()
	d.onlySentinelsTold(h) // fails on a second notification of the finding
}

// countMarks counts the records of kind in the task's history whose
// reason holds reason.
func countMarks(task apollo.Task, kind apollo.Kind, reason string) int {
	n := 0
	for _, r := range task.History {
		if r.Kind == kind && strings.Contains(r.Reason, reason) {
			n++
		}
	}
	return n
}

// awaitCheckpoint waits for a checkpoint whose copy was taken after
// everything accepted before the call: the second to end after it (the
// first may have copied before).
func (d *deployment) awaitCheckpoint() {
	d.t.Helper()
	taken := d.figure("apollo_checkpoints_total")
	eventually(d.t, 30*time.Second, "a checkpoint", func() bool {
		return d.figure("apollo_checkpoints_total") >= taken+2
	})
}
