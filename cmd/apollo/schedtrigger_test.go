package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// A run triggered through the API (apollo job run) and answered with its
// task ID is there after the server is killed the moment it answers: the
// restarted scheduler settles it (skipped, "scheduler stopped", or failed
// and lost once its process had started). Before, the answer came before
// the run was in the scheduler's state file, and a kill -9 right after it
// left a task ID that no listing, no alert and no restart ever showed.
func TestTriggeredRunSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte("jobs:\n  - {name: by_hand, schedule: \"@yearly\", command: [\"sleep\", \"60\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0"}
	for round := range 3 {
		srv := startApollo(t, args...)
		ans := runJob(t, srv.addr, "by_hand")
		srv.kill() // the moment the answer is read
		srv = startApollo(t, args...)
		var tk apollo.Task
		settled := func() bool {
			return apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(ans.TaskID), &tk) == http.StatusOK &&
				(tk.Status == apollo.StatusManualBlocked || tk.Status.Final())
		}
		eventually(t, 30*time.Second, fmt.Sprintf("round %d: the triggered run %s settled after the restart", round, ans.TaskID), settled)
		if tk.Status != apollo.StatusManualBlocked && tk.Status != apollo.StatusFailed {
			t.Errorf("round %d: the run killed with the server is %s, want manual_blocked or failed", round, tk.Status)
		}
		srv.kill()
	}
}

// runJob starts a run of job through the API (POST /api/v1/jobs/NAME/run)
// and returns the answer; anything but 200 with a task ID fails the test.
func runJob(t *testing.T, addr, job string) apiclient.JobAction {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/api/v1/jobs/"+url.PathEscape(job)+"/run", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ans apiclient.JobAction
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || ans.TaskID == "" {
		t.Fatalf("run of %s answered %d %+v (%v)", job, resp.StatusCode, ans, err)
	}
	return ans
}

// endedRun waits until task id has ended and returns it.
func endedRun(t *testing.T, addr, id string) apollo.Task {
	t.Helper()
	var tk apollo.Task
	eventually(t, 30*time.Second, "the run "+id+" ended", func() bool {
		return apiGet(t, addr, "/api/v1/tasks/"+url.PathEscape(id), &tk) == http.StatusOK && tk.Status.Final()
	})
	return tk
}
