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

	"github.com/apollo-11/apollo"
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
	killGroupsAtCleanup(t, pids)
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

// A job's env sets the PATH its command is found in, as it does for
// everything the command starts: with env: {PATH: DIR} and command:
// [mytool], DIR/mytool runs. Before, the command was looked up in the
// scheduler's own PATH, so the run failed "executable file not found in
// $PATH" while a shell job with the same env found the same program.
func TestJobCommandIsFoundInItsOwnPath(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "apollo_test_tool"), []byte("#!/bin/sh\necho tool ran\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte("jobs:\n  - name: tool_job\n    schedule: \"@yearly\"\n    command: [apollo_test_tool]\n    env: {PATH: \""+bin+":/usr/bin:/bin\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0")
	tk := endedRun(t, srv.addr, runJob(t, srv.addr, "tool_job").TaskID)
	if last := tk.History[len(tk.History)-1]; tk.Status != apollo.StatusSuccess || !strings.Contains(string(last.Extra), "tool ran") {
		t.Errorf("the run is %s, want success with the tool's output: %s", tk.Status, last.Extra)
	}
}

// A run the scheduler times out is reported by the scheduler, with its
// output tails and "killed", before the server's own deadline for it (the
// net for a scheduler that died) passes. Before, that deadline was the
// job's timeout plus its kill grace to the millisecond, while the
// scheduler's report came after those and after the output was read: a
// process that ignored SIGTERM made it a race, and one that had started a
// daemon in a session of its own (which keeps the output open, read for
// up to 2 s more) lost it every time; the server timed the run out itself
// and the scheduler's report, the output with it, was dropped.
func TestSchedulersTimeoutComesBeforeTheServers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte(`jobs:
  - name: slow_job
    schedule: "@yearly"
    shell: "setsid sleep 600 & echo $! > `+pids+`; echo last words; exec sleep 600"
    timeout: 1s
    kill_grace: 1s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0")
	tk := endedRun(t, srv.addr, runJob(t, srv.addr, "slow_job").TaskID)
	last := tk.History[len(tk.History)-1]
	if tk.Status != apollo.StatusTimeout || last.Kind != apollo.KindReport || !strings.Contains(string(last.Extra), `"killed":true`) ||
		!strings.Contains(string(last.Extra), "last words") {
		t.Errorf("the run ended %s by a %v event with extra %s; want the scheduler's timeout report with the output", tk.Status, last.Kind, last.Extra)
	}
}

// A job paused through the API, then taken out of the jobs file and put
// back, comes back not paused (a job new to the file takes its paused
// field): GET /api/v1/jobs says so, and so it must stay after kill -9.
// Before, a reload did not write the state file, so the pause saved
// before the removal was still there, and the restarted server put it
// back on a job that the API had shown running on its schedule.
func TestPauseOfARemovedJobDoesNotComeBackAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	withJob := "jobs:\n" +
		"  - {name: other_job, schedule: \"@yearly\", command: [\"true\"]}\n" +
		"  - {name: held_job, schedule: \"@yearly\", command: [\"true\"]}\n"
	without := "jobs:\n  - {name: other_job, schedule: \"@yearly\", command: [\"true\"]}\n"
	write := func(s string) {
		if err := os.WriteFile(jobs, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(withJob)
	args := []string{"server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0"}
	srv := startApollo(t, args...)
	job := func() (listed, paused bool) {
		var l apiclient.JobList
		apiGet(t, srv.addr, "/api/v1/jobs", &l)
		for _, j := range l.Jobs {
			if j.Name == "held_job" {
				return true, j.Paused
			}
		}
		return false, false
	}
	resp, err := http.Post("http://"+srv.addr+"/api/v1/jobs/held_job/pause", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, paused := job(); resp.StatusCode != http.StatusOK || !paused {
		t.Fatalf("pause answered %d, and the job shows paused = %v", resp.StatusCode, paused)
	}

	write(without)
	srv.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "held_job gone after the reload", func() bool { listed, _ := job(); return !listed })
	write(withJob)
	srv.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "held_job back after the reload", func() bool { listed, _ := job(); return listed })
	if _, paused := job(); paused {
		t.Fatal("held_job, back in the file without paused: true, shows paused")
	}

	srv.kill()
	srv = startApollo(t, args...)
	if listed, paused := job(); !listed || paused {
		t.Errorf("after kill -9 held_job listed = %v, paused = %v; want listed and not paused, as the API showed before", listed, paused)
	}
}

// killGroupsAtCleanup kills, when the test ends, the process groups whose
// leaders' PIDs the test's jobs wrote to the file pids, one a line: the
// runs' processes are in groups of their own, and a run the test left
// would outlive it.
func killGroupsAtCleanup(t *testing.T, pids string) {
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
}
