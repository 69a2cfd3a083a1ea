package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/redisstore"
)

// A finding held before its mark while a checkpoint is taken, then lost
// to kill -9, is marked and told after the restart, once, in each tenant
// and in every mode, and not again after another kill -9. Before, the
// snapshot kept nothing of the findings not yet marked, and its run was
// in the snapshot, so the replay of the log after it never found it
// again: it was lost for good.
func TestFindingHeldAcrossACheckpointIsTold(t *testing.T) {
	for _, f := range []heldFinding{
		{on: "too_short", job: "quick", exp: "min_runtime: 1h"},
		{on: "flapping", job: "flappy", exp: "flapping: {changes: 2, window: 1h}"},
	} {
		t.Run(f.on, func(t *testing.T) {
			eachMode(t, deployOptions{config: "snapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
				f.checkpoint = true
				if f.on == "too_short" {
					f.report, f.checked = d.succeedQuick, d.tooShortMarkedOnce
				} else {
					f.report = func(tenant, job string) {
						d.succeedThenFail(tenant, job)
						d.endedRun(tenant, job, job+"-ok-2", apollo.StatusSuccess)
					}
					f.checked = d.flappingMarkedOnce
				}
				f.toldOnce(t, d, h)
			})
		})
	}
}

// A job whose first runs are in a snapshot and whose next run makes it
// flap is found flapping, and told once after a kill -9 before the mark,
// in each tenant and in every mode. Before, the snapshot kept no
// flapping state: a start from it had forgotten the runs before it, and
// the switches they made counted for nothing.
func TestFlappingOverACheckpointIsFound(t *testing.T) {
	eachMode(t, deployOptions{config: "snapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
		heldFinding{on: "flapping", job: "flappy", exp: "flapping: {changes: 2, window: 1h}",
			before:  d.succeedThenFail,
			report:  func(tenant, job string) { d.endedRun(tenant, job, job+"-ok-2", apollo.StatusSuccess) },
			checked: d.flappingMarkedOnce,
		}.toldOnce(t, d, h)
	})
}

// A job whose starts straddle a checkpoint, two before it and one after
// it within runs_window, is found too often at the third, and told once
// after a kill -9 before the mark, in each tenant and in every mode.
// Before, the snapshot kept none of the starts max_runs counts: a start
// from it had forgotten the two before it.
func TestTooOftenOverACheckpointIsFound(t *testing.T) {
	eachMode(t, deployOptions{config: "snapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
		heldFinding{on: "too_often", job: "busy", exp: "max_runs: 2\n    runs_window: 1h",
			before: func(tenant, job string) {
				d.succeed(tenant, job, job+"-1")
				d.succeed(tenant, job, job+"-2")
			},
			report: func(tenant, job string) { d.succeed(tenant, job, job+"-3") },
			checked: func(tenant, job string) {
				d.t.Helper()
				for i, want := range []int{0, 0, 1} {
					var task apollo.Task
					d.do(tenant, "GET", fmt.Sprintf("/api/v1/tasks/%s-%d", job, i+1), "", &task, 200)
					if n := countMarks(task, apollo.KindTooOften, "max_runs 2"); n != want {
						d.t.Fatalf("tenant %s: run %d has %d too_often marks, want %d: %+v", tenant, i+1, n, want, task.History)
					}
				}
			},
		}.toldOnce(t, d, h)
	})
}

// A job down (its latest run failed) when a checkpoint is taken still
// holds its downstream job's alerts after a kill -9, in each tenant and
// in every mode: the downstream job's failure is not told (and, in the
// all-in-one server, is shown inhibited by it). Before, the snapshot kept
// no job's state and the log after it held no run of the upstream job:
// after the restart it was not down, and the echo was told (all-in-one),
// or the bus worked out that nothing was held (three processes; the held
// jobs it wrote before the kill are cleared first, so that only what the
// restarted bus works out counts).
func TestUpstreamDownAtACheckpointStillHolds(t *testing.T) {
	eachMode(t, deployOptions{config: "snapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_failed task_prefix: "%[1]s_etl_load" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant), nil, 200)
			d.putExpectations(tenant, fmt.Sprintf("expectations:\n  - {job: %[1]s_etl_load, upstream: [%[1]s_etl_extract]}\n", tenant))
			d.fail(tenant, tenant+"_etl_extract")
		}
		d.awaitCheckpoint() // the extracts' failures are in the snapshot, not in the log after it
		if !d.three {
			d.crash()
		} else {
			d.alert.kill()
			d.api.kill()
			c, err := redisstore.Open(redisURL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := redisstore.SaveHeld(testCtx(t, time.Minute), c, d.prefix, redisstore.Held{}); err != nil {
				t.Fatal(err)
			}
			d.start()
			awaitLoadsHeld(t, c, d.prefix, "after kill -9, ")
		}
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_etl_load")
			d.fail(tenant, tenant+"_sentinel")
		}
		// Fails on a notification of the held echo.
		awaitTenants(t, h, "firing", map[string]string{"acme": "acme_sentinel", "globex": "globex_sentinel"})
		if d.three {
			return
		}
		for _, tenant := range tenants {
			if a := d.firingAlert(tenant, tenant+"_failed"); !slices.Equal(a.InhibitedBy, []string{tenant + "_etl_extract"}) {
				t.Fatalf("%s's load alert after kill -9: %+v, want inhibited by %s_etl_extract", tenant, a, tenant)
			}
		}
	})
}
