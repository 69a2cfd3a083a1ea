package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// apollo sched is killed (-9) while a run is in progress, then started
// again on the same state directory: the run it lost is settled on the
// server (failed, "lost" in extra) instead of showing running for ever,
// and the run's process group, still there, is killed instead of running
// on beside the runs of the new scheduler.
func TestSchedKilledMidRunSettlesTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// Only the first run hangs: it takes the lock directory, says which
	// task and process it is, and sleeps. Later runs end at once.
	os.WriteFile(filepath.Join(dir, "jobs.yaml"), []byte(`jobs:
  - name: lost_job
    schedule: "@every 1s"
    shell: "mkdir `+filepath.Join(dir, "lock")+` 2>/dev/null || exit 0; echo $APOLLO_TASK_ID $$ > `+runs+`; exec sleep 600"
`), 0o644)
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	args := []string{"sched", "--jobs", filepath.Join(dir, "jobs.yaml"), "--server", "http://" + srv.addr, "--state", filepath.Join(dir, "sched")}
	first := startProc(t, "apollo sched: ", args...)
	var task string
	var pid int
	eventually(t, 30*time.Second, "the first run started", func() bool {
		b, _ := os.ReadFile(runs)
		_, err := fmt.Sscan(string(b), &task, &pid)
		return err == nil
	})
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	taskNow := func() apollo.Task {
		var tk apollo.Task
		apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(task), &tk)
		return tk
	}
	eventually(t, 30*time.Second, "the run running on the server", func() bool { return taskNow().Status == apollo.StatusRunning })
	first.kill()
	if !processAlive(pid) {
		t.Fatal("the run's process died with the scheduler: this test needs it to outlive it")
	}

	second := startProc(t, "apollo sched: ", args...)
	defer func() {
		if t.Failed() {
			t.Logf("first sched:\n%s\nsecond sched:\n%s", first.out, second.out)
		}
	}()
	var tk apollo.Task
	eventually(t, 30*time.Second, "the lost run settled", func() bool {
		tk = taskNow()
		return tk.Status.Final()
	})
	if tk.Status != apollo.StatusFailed {
		t.Errorf("the lost run is %s, want failed", tk.Status)
	}
	if last := tk.History[len(tk.History)-1]; !strings.Contains(string(last.Extra), `"lost":true`) {
		t.Errorf("the settling event's extra does not say the run was lost: %s", last.Extra)
	}
	eventually(t, 30*time.Second, "the lost run's process killed", func() bool { return !processAlive(pid) })
	second.term(t)
}

// processAlive reports whether pid is a process that has not exited (a
// zombie that nobody reaped has).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// apollo sched is killed (-9) while the last event of a run that has ended
// is still on its way (here the server's answer to it never comes; in
// production a batch waits up to its flush interval): the run is settled
// by the next scheduler instead of showing running on the server for
// ever. The run left the state file when its end was sent, before.
func TestSchedKilledWithALastEventUndelivered(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "jobs.yaml"), []byte(`jobs:
  - name: quick_job
    schedule: "@every 1s"
    shell: "sleep 1"
`), 0o644)
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	target, _ := url.Parse("http://" + srv.addr)
	forward := httputil.NewSingleHostReverseProxy(target)
	// The proxy passes everything but the first request that carries an
	// end (success): that one it holds until the scheduler is gone.
	held := make(chan string, 1)
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var evs []apollo.Event
		json.Unmarshal(body, &evs)
		for _, ev := range evs {
			if ev.Status == apollo.StatusSuccess {
				hold := false
				once.Do(func() { hold = true; held <- ev.TaskID })
				if hold {
					<-r.Context().Done()
					return
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		forward.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	state := filepath.Join(dir, "sched")
	first := startProc(t, "apollo sched: ", "sched", "--jobs", filepath.Join(dir, "jobs.yaml"), "--server", proxy.URL, "--state", state)
	var task string
	select {
	case task = <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no run ended within 30 s:\n%s", first.out)
	}
	var tk apollo.Task
	eventually(t, 30*time.Second, "the run running on the server", func() bool {
		apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(task), &tk)
		return tk.Status == apollo.StatusRunning
	})
	first.kill()

	second := startProc(t, "apollo sched: ", "sched", "--jobs", filepath.Join(dir, "jobs.yaml"), "--server", "http://"+srv.addr, "--state", state)
	eventually(t, 30*time.Second, "the run whose end was lost settled", func() bool {
		apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(task), &tk)
		return tk.Status.Final()
	})
	if last := tk.History[len(tk.History)-1]; tk.Status != apollo.StatusFailed || !strings.Contains(string(last.Extra), `"lost":true`) {
		t.Errorf("the run is %s with %s, want failed and lost", tk.Status, last.Extra)
	}
	second.term(t)
}

// apollo sched pointed at the state directory of a scheduler that runs
// (the one in apollo server --jobs, DATA/sched, or another apollo sched)
// is refused with the directory and what to do, and exits 1. Before, on
// the server's it started: every job ran twice, the two wrote over each
// other's state file, and each would settle the other's runs as lost at
// its next start, killing them; on another apollo sched's it was refused
// for a spool directory the user never named ("WithSpoolDir: DIR/spool is
// used by another process").
func TestSecondSchedulerOnOneStateDirIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	os.WriteFile(jobs, []byte("jobs:\n  - {name: twice_job, schedule: \"@yearly\", command: [\"true\"]}\n"), 0o644)
	data := filepath.Join(dir, "data")
	srv := startApollo(t, "server", "--data", data, "--jobs", jobs, "--listen", "127.0.0.1:0")
	own := filepath.Join(dir, "sched")
	startProc(t, "apollo sched: ", "sched", "--jobs", jobs, "--state", own, "--server", "http://"+srv.addr)
	for _, state := range []string{filepath.Join(data, "sched"), own} {
		ctx := testCtx(t, 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "sched", "--jobs", jobs, "--state", state, "--server", "http://"+srv.addr)
		cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("apollo sched on the state directory %s of a running scheduler ran on:\n%s", state, out)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "in use by another scheduler") ||
			!strings.Contains(string(out), state) || strings.Contains(string(out), "WithSpoolDir") {
			t.Errorf("apollo sched on the state directory %s of a running scheduler: %v\n%s\nwant exit 1 naming the directory in use by another scheduler", state, err, out)
		}
	}
}
