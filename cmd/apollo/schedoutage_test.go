package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// The monitoring server is down while apollo sched runs jobs: the jobs run
// anyway, their reports wait in the spool, and every run appears once the
// server is back.
func TestSchedSurvivesServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	os.WriteFile(filepath.Join(dir, "jobs.yaml"), []byte(`jobs:
  - name: outage_job
    schedule: "@every 1s"
    shell: "echo run >> `+marks+`"
`), 0o644)
	addr := freeAddr(t)
	sched := startProc(t, "apollo sched: ", "sched", "--jobs", filepath.Join(dir, "jobs.yaml"),
		"--server", "http://"+addr, "--state", filepath.Join(dir, "sched"))
	// The jobs run with nobody listening.
	eventually(t, 30*time.Second, "three runs with the server down", func() bool {
		b, _ := os.ReadFile(marks)
		return strings.Count(string(b), "run") >= 3
	})
	b, _ := os.ReadFile(marks)
	ran := strings.Count(string(b), "run") // runs made while nobody listened
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--listen", addr)
	var got int
	defer func() {
		if t.Failed() {
			t.Logf("ran %d, server has %d\nsched stderr:\n%s", ran, got, sched.out)
		}
	}()
	eventually(t, 30*time.Second, "every run on the server", func() bool {
		var tasks struct{ Tasks []apollo.Task }
		apiGet(t, srv.addr, "/api/v1/tasks?prefix=outage_job&status=success&limit=1000", &tasks)
		got = len(tasks.Tasks)
		return got >= ran
	})
	sched.term(t)
}
