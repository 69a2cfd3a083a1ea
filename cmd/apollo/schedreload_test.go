//go:build linux

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// A job taken out of the jobs file while it runs, and put back (a job
// commented out for a moment, a bad edit undone), is still the job that
// runs: its run in progress counts for its concurrency policy. Before, the
// job came back as a new one with no run in progress, so a forbid job
// started a second run beside the first (here through apollo job run; its
// next schedule did the same), and GET /api/v1/jobs said it ran nothing.
func TestJobRemovedAndPutBackKeepsItsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	pids := filepath.Join(dir, "pids")
	withJob := "jobs:\n" +
		"  - {name: other_job, schedule: \"@yearly\", command: [\"true\"]}\n" +
		"  - {name: hang_job, schedule: \"@yearly\", shell: \"echo $$ >> " + pids + "; exec sleep 600\"}\n"
	without := "jobs:\n  - {name: other_job, schedule: \"@yearly\", command: [\"true\"]}\n"
	write := func(s string) {
		if err := os.WriteFile(jobs, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(withJob)
	t.Cleanup(func() { // the runs' processes are in groups of their own
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0")
	run := func() int {
		resp, err := http.Post("http://"+srv.addr+"/api/v1/jobs/hang_job/run", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	job := func() (listed bool, running int) {
		var l apiclient.JobList
		apiGet(t, srv.addr, "/api/v1/jobs", &l)
		for _, j := range l.Jobs {
			if j.Name == "hang_job" {
				return true, j.Running
			}
		}
		return false, 0
	}
	if code := run(); code != http.StatusOK {
		t.Fatalf("the first run answered %d", code)
	}
	eventually(t, 30*time.Second, "the first run's process started", func() bool {
		b, _ := os.ReadFile(pids)
		return len(strings.Fields(string(b))) == 1
	})

	write(without)
	srv.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "hang_job gone after the reload", func() bool { listed, _ := job(); return !listed })
	write(withJob)
	srv.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "hang_job back after the reload", func() bool { listed, _ := job(); return listed })

	if _, running := job(); running != 1 {
		t.Errorf("hang_job back in the file lists %d runs in progress, want its 1", running)
	}
	if code := run(); code != http.StatusConflict {
		t.Errorf("a run of hang_job (concurrency forbid) while its first run goes on answered %d, want 409", code)
	}
	if b, _ := os.ReadFile(pids); len(strings.Fields(string(b))) > 1 {
		t.Errorf("hang_job ran twice at once: processes %s", strings.Fields(string(b)))
	}
}
