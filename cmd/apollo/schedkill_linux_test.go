package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"))
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
