package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// missedSlots are the slots of the missed runs recorded for job (their
// task IDs, missed:JOB@UNIXSECONDS).
func missedSlots(t *testing.T, ctx context.Context, c *apiclient.Client, job string) []time.Time {
	t.Helper()
	var out []time.Time
	q := apiclient.TaskQuery{Prefix: "missed:" + job + "@", Limit: 1000}
	for {
		page, err := c.Tasks(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			_, sec, _ := strings.Cut(strings.TrimPrefix(task.TaskID, "missed:"), "@")
			n, err := strconv.ParseInt(sec, 10, 64)
			if err != nil || task.Name != job {
				continue // another job whose name begins with job
			}
			out = append(out, time.Unix(n, 0))
		}
		if page.Next == "" {
			return out
		}
		q.Cursor = page.Next
	}
}

// missedAfter waits until the default tenant's etl_extract (expected
// every 2 s by the expectations file, never run) has a missed run
// expected after from: the evaluation that found it judged every other
// expected run up to then too. It returns the missed runs of job in c's
// tenant expected after from.
func missedAfter(t *testing.T, ctx context.Context, def, c *apiclient.Client, job string, from time.Time) []time.Time {
	t.Helper()
	eventually(t, time.Minute, "a missed run of etl_extract after "+from.Format(time.TimeOnly), func() bool {
		for _, s := range missedSlots(t, ctx, def, "etl_extract") {
			if s.After(from) {
				return true
			}
		}
		return false
	})
	var out []time.Time
	for _, s := range missedSlots(t, ctx, c, job) {
		if s.After(from.Add(-time.Second)) {
			out = append(out, s)
		}
	}
	return out
}

// A job of the server's scheduler paused at run time (apollo job pause)
// is not expected to run: it gets no missed runs while paused, across
// kill -9, and another tenant's job of the same name is still expected.
// Before, the jobs file's expectations took its paused field only, so a
// paused job was recorded missed every second here, an ON: missed alert
// for a run the scheduler had been told not to start.
func TestAPausedJobIsNotExpected(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	jobs := filepath.Join(x.dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte("jobs:\n  - {name: tick, schedule: \"* * * * * *\", command: [\"true\"], late_after: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *proc {
		return startApollo(t, "server", "--config", x.cfg, "--listen", "127.0.0.1:0", "--jobs", jobs)
	}
	srv := start()
	ctx := testCtx(t, 2*time.Minute)
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	if _, err := acme.PutExpectations(ctx, []byte("expectations:\n  - {job: tick, schedule: \"* * * * * *\", grace: 1s}\n")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a run of tick", func() bool {
		page, err := def.Tasks(ctx, apiclient.TaskQuery{Prefix: "tick@", Status: apollo.StatusSuccess})
		return err == nil && len(page.Tasks) > 0
	})
	if _, err := def.PauseJob(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	check := func(def, acme *apiclient.Client, from time.Time, when string) {
		t.Helper()
		// A run already due when the pause came may still be judged.
		from = from.Add(2 * time.Second)
		if got := missedAfter(t, ctx, def, def, "tick", from); len(got) > 0 {
			t.Errorf("%s: the paused job tick has missed runs expected at %v", when, got)
		}
		if got := missedAfter(t, ctx, def, acme, "tick", from); len(got) == 0 {
			t.Errorf("%s: tenant acme's tick, which never runs, has no missed run", when)
		}
	}
	check(def, acme, time.Now(), "paused")
	srv.kill()
	srv = start()
	check(x.client(t, srv, ""), x.client(t, srv, "acme"), time.Now(), "after kill -9")
}

// The expected runs of the server's scheduler's jobs that fell while the
// server was down are judged at the restart, as those of the
// expectations file are (docs/expectations.md: runs are expected from
// the time expectations were last judged). Before, the jobs file's
// expectations were put in force only once the scheduler started, after
// the replay, and expected runs from then on: a daily job whose run the
// downtime swallowed (catchup: skip) never showed as missed, while a job
// of the expectations file on the same schedule did.
func TestJobsMissedWhileDownAreFound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	jobs := filepath.Join(x.dir, "jobs.yaml")
	// On the schedule of the file's etl_extract, which never runs.
	if err := os.WriteFile(jobs, []byte("jobs:\n  - {name: nightly, schedule: \"*/2 * * * * *\", command: [\"true\"], late_after: 1s, catchup: skip}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *proc {
		return startApollo(t, "server", "--config", x.cfg, "--listen", "127.0.0.1:0", "--jobs", jobs)
	}
	srv := start()
	ctx := testCtx(t, 2*time.Minute)
	def := x.client(t, srv, "")
	eventually(t, time.Minute, "a run of nightly", func() bool {
		page, err := def.Tasks(ctx, apiclient.TaskQuery{Prefix: "nightly@", Status: apollo.StatusSuccess})
		return err == nil && len(page.Tasks) > 0
	})
	srv.term(t) // a clean stop: the snapshot keeps up to when runs were judged
	down := time.Now()
	// The scenario is a scheduled run inside the downtime: the next even
	// second, and its second of grace, pass before the restart. What is
	// waited for is the clock itself; no signal says it.
	slot := down.Truncate(2 * time.Second).Add(2 * time.Second)
	<-time.After(time.Until(slot.Add(1100 * time.Millisecond)))
	srv = start()
	up := time.Now()
	def = x.client(t, srv, "")
	missedAfter(t, ctx, def, def, "etl_extract", up)
	inDowntime := func(job string) []time.Time {
		var out []time.Time
		for _, s := range missedSlots(t, ctx, def, job) {
			if s.After(down) && s.Before(up.Add(-time.Second)) {
				out = append(out, s)
			}
		}
		slices.SortFunc(out, time.Time.Compare)
		return out
	}
	file, sched := inDowntime("etl_extract"), inDowntime("nightly")
	if len(file) == 0 {
		t.Fatalf("no missed run of etl_extract between %v and %v", down, up)
	}
	if !slices.Equal(sched, file) {
		t.Errorf("missed runs expected while the server was down: the jobs file's nightly %v, the expectations file's etl_extract %v (the same schedule)", sched, file)
	}
}
