package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// A run the scheduler skips on purpose is told once, as the scheduler's
// skip (manual_blocked, "previous run still running"), and not also as a
// missed run of the job's expectation: a forbid job whose run outlasts its
// schedule gets no missed runs (nor ON: missed alerts) while its run goes
// on, across kill -9; another tenant's job of the same name, which never
// runs, is still missed. Before, each skipped tick was recorded missed a
// second later: two alerts for one decision the scheduler made on purpose.
func TestSkippedRunsAreNotMissed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	jobs := filepath.Join(x.dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte(`jobs:
  - {name: slow, schedule: "* * * * * *", command: ["sleep", "60"], late_after: 1s, concurrency: forbid, timeout: 5m}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *proc {
		return startApollo(t, "server", "--config", x.cfg, "--listen", "127.0.0.1:0", "--jobs", jobs)
	}
	srv := start()
	ctx := testCtx(t, 2*time.Minute)
	if _, err := x.client(t, srv, "acme").PutExpectations(ctx, []byte("expectations:\n  - {job: slow, schedule: \"* * * * * *\", grace: 1s}\n")); err != nil {
		t.Fatal(err)
	}
	check := func(p *proc, when string, since time.Time) {
		t.Helper()
		def, acme := x.client(t, p, ""), x.client(t, p, "acme")
		// From the start of the run that the later ticks are skipped for.
		var from time.Time
		eventually(t, time.Minute, when+": slow running", func() bool {
			page, err := def.Tasks(ctx, apiclient.TaskQuery{Prefix: "slow@", Status: apollo.StatusRunning})
			// After kill -9, the run in progress before it is settled
			// (failed, lost) and a new one starts.
			if err != nil || len(page.Tasks) == 0 || page.Tasks[0].StartedAt < since.UnixMilli() {
				return false
			}
			from = time.UnixMilli(page.Tasks[0].StartedAt).Add(time.Second)
			return true
		})
		eventually(t, time.Minute, when+": ticks of slow skipped", func() bool {
			return len(skipped(t, ctx, def, from)) >= 2
		})
		if got := missedAfter(t, ctx, def, def, "slow", from); len(got) > 0 {
			t.Errorf("%s: slow's ticks after %v were skipped by the scheduler (%d skips), and also recorded missed at %v",
				when, from.Format(time.TimeOnly), len(skipped(t, ctx, def, from)), got)
			page, _ := def.Tasks(ctx, apiclient.TaskQuery{Prefix: "slow@", Limit: 1000})
			for _, tk := range page.Tasks {
				t.Logf("%s %s, updated %s", tk.TaskID, tk.Status, time.UnixMilli(tk.UpdatedAt).Format("15:04:05.000"))
			}
		}
		if got := missedAfter(t, ctx, def, acme, "slow", from); len(got) == 0 {
			t.Errorf("%s: tenant acme's slow, which never runs, has no missed run", when)
		}
	}
	check(srv, "live", time.Time{})
	srv.kill()
	restarted := time.Now()
	srv = start()
	check(srv, "after kill -9", restarted)
}

// skipped are the default tenant's runs of slow skipped since from.
func skipped(t *testing.T, ctx context.Context, c *apiclient.Client, from time.Time) []apollo.Task {
	t.Helper()
	page, err := c.Tasks(ctx, apiclient.TaskQuery{Prefix: "slow@", Status: apollo.StatusManualBlocked, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []apollo.Task
	for _, task := range page.Tasks {
		if task.UpdatedAt >= from.UnixMilli() {
			out = append(out, task)
		}
	}
	return out
}
