package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A jobs file's late_after is the lateness of that job of the
// scheduler's tenant, and of nothing else (docs/operations.md, "Jobs run
// by the scheduler also use their late_after"): not of every job whose
// name begins with it, and not of another tenant's job of the same name.
// Before, the scheduler's job extract (late_after: 1h) was handed to the
// bus as a prefix for every tenant, so a run of extract_eu, or tenant
// acme's own extract, that started five minutes after its scheduledAt
// was not late (the default is 1m), before and after kill -9.
func TestLateAfterIsTheJobsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server")
	}
	t.Parallel()
	x := newExpectServer(t)
	jobs := filepath.Join(x.dir, "jobs.yaml")
	// Due once a year: the scheduler never runs it during the test.
	if err := os.WriteFile(jobs, []byte(`jobs:
  - {name: extract, schedule: "0 0 1 1 *", timezone: UTC, command: ["true"], late_after: 1h}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *proc {
		return startApollo(t, "server", "--config", x.cfg, "--listen", "127.0.0.1:0", "--jobs", jobs)
	}
	srv := start()
	now := time.Now()
	due, began := now.Add(-5*time.Minute).UnixMilli(), now.UnixMilli()
	run := func(id, job string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":%q,"status":"pending","sequence":1,"ts":%d,"scheduledAt":%d},
{"taskID":%[1]q,"name":%[2]q,"status":"running","sequence":2,"ts":%[5]d}`, id, job, due, due, began)
	}
	report(t, srv.addr, x.tokens[""], "["+run("own", "extract")+","+run("eu", "extract_eu")+"]")
	report(t, srv.addr, x.tokens["acme"], "["+run("own", "extract")+","+run("eu", "extract_eu")+"]")
	want := map[string]map[string]bool{
		"":     {"own": false, "eu": true}, // the scheduler's job keeps its 1h
		"acme": {"own": true, "eu": true},
	}
	check := func(p *proc, when string) {
		t.Helper()
		ctx := testCtx(t, time.Minute)
		for tenant, ids := range want {
			c := x.client(t, p, tenant)
			for id, late := range ids {
				task, err := c.Task(ctx, id)
				if err != nil {
					t.Fatalf("%s: tenant %q: %s: %v", when, tenant, id, err)
				}
				if task.Late != late {
					t.Errorf("%s: tenant %q: run %s of job %s started 5m after its scheduledAt: late %v, want %v", when, tenant, id, task.Name, task.Late, late)
				}
			}
		}
	}
	check(srv, "before the restart")
	srv.kill()
	check(start(), "after kill -9")
}
