package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A run started before a checkpoint and still running after a kill -9
// and a restart from that snapshot is timed out when it passes its job's
// max_runtime, and told once, in each tenant and in every mode; another
// kill -9 after it was told does not tell it again. Before, the snapshot
// kept none of the runs the evaluator watched for max_runtime, and the
// log after it held no start of the run: after the restart nothing
// watched it, and it ran on, never too long.
func TestRunOverACheckpointIsTimedOut(t *testing.T) {
	eachMode(t, deployOptions{config: "snapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
		// Long enough for a checkpoint and a restart on a loaded machine;
		// checked below.
		const maxRuntime = 20 * time.Second
		want := map[string]string{}
		for _, tenant := range tenants {
			want[tenant] = tenant + "_timeout"
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_timeout task_prefix: "%[1]s_slow" ON: timeout GROUP_WINDOW: 1s NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant), nil, 200)
			d.putExpectations(tenant, fmt.Sprintf("expectations:\n  - {job: %s_slow, max_runtime: %s}\n", tenant, maxRuntime))
		}
		started := time.Now()
		for _, tenant := range tenants {
			start, _ := d.runAt()
			d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(`{"taskID":"slow-%[1]s","name":"%[1]s_slow","sequence":1,"status":"running","ts":%[2]d}`,
				tenant, start), nil, 200)
		}
		d.awaitCheckpoint() // the starts are in the snapshot, not in the log after it
		d.crash()
		taskOf := func(tenant string) apollo.Task {
			t.Helper()
			var task apollo.Task
			d.do(tenant, "GET", "/api/v1/tasks/slow-"+tenant, "", &task, 200)
			return task
		}
		for _, tenant := range tenants {
			if task := taskOf(tenant); task.Status != apollo.StatusRunning {
				t.Fatalf("tenant %s: the run is %s after the restart, %v after its start: max_runtime %v is too short for this machine: %+v",
					tenant, task.Status, time.Since(started).Round(time.Millisecond), maxRuntime, task.History)
			}
		}
		awaitTenants(t, h, "firing", want)
		for _, tenant := range tenants {
			task := taskOf(tenant)
			if n := countMarks(task, apollo.KindTimeout, ""); task.Status != apollo.StatusTimeout || n != 1 {
				t.Fatalf("tenant %s: the run is %s with %d timeout records, want timed out once: %+v", tenant, task.Status, n, task.History)
			}
		}
		d.awaitResolvedPastDedup(want)
		d.crash()
		d.onlySentinelsTold(h) // fails on a second notification of the timeout
	})
}
