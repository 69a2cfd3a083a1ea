//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// The scheduler's state file holds the jobs of the jobs file and the runs
// in progress, and nothing else: however many runs there were, and however
// many jobs came and went (by a reload, or by a start on another jobs
// file), with a kill -9 after each round, it stays as small as the jobs
// file; and the scheduler started on it still does what it said: a job
// paused through the API in the first round stays paused and never runs,
// the others run, and the run a kill left is settled, not kept.
func TestSchedStateStaysBoundedAcrossJobChurnAndKills(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	jobsPath := filepath.Join(dir, "jobs.yaml")
	pids := filepath.Join(dir, "pids")
	killGroupsAtCleanup(t, pids)
	const churn = 8
	write := func(round string) []string {
		names := []string{"keep_job", "held_job", "hang_job"}
		var b strings.Builder
		b.WriteString("jobs:\n" +
			"  - {name: keep_job, schedule: \"@every 1s\", command: [\"true\"]}\n" +
			"  - {name: held_job, schedule: \"@every 1s\", command: [\"true\"]}\n" +
			"  - {name: hang_job, schedule: \"@every 1s\", shell: \"echo $$ >> " + pids + "; exec sleep 600\"}\n")
		for i := range churn {
			name := fmt.Sprintf("%s_job_%d", round, i)
			names = append(names, name)
			fmt.Fprintf(&b, "  - {name: %s, schedule: \"@every 1s\", command: [\"true\"]}\n", name)
		}
		if err := os.WriteFile(jobsPath, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return names
	}
	jobsOf := func(srv *proc) map[string]apollo.ScheduledJob {
		var l apiclient.JobList
		apiGet(t, srv.addr, "/api/v1/jobs", &l)
		m := map[string]apollo.ScheduledJob{}
		for _, j := range l.Jobs {
			m[j.Name] = j
		}
		return m
	}
	// ranSince waits until every job of names but held_job and hang_job
	// has a run that ended in success and is not one of before.
	ranSince := func(srv *proc, names []string, before map[string]apollo.ScheduledJob) {
		t.Helper()
		eventually(t, 30*time.Second, "a new run of every job of "+names[3], func() bool {
			now := jobsOf(srv)
			for _, n := range names {
				if n == "held_job" || n == "hang_job" {
					continue
				}
				j, ok := now[n]
				if !ok || j.LastStatus != apollo.StatusSuccess || j.LastTaskID == before[n].LastTaskID {
					return false
				}
			}
			return now["hang_job"].Running == 1
		})
	}
	var sizes []int
	checkState := func(round string, names []string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(data, "sched", "sched-state.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Jobs map[string]json.RawMessage `json:"jobs"`
			Runs map[string]struct {
				Job string `json:"job"`
			} `json:"runs"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("round %s: state file: %v\n%s", round, err, b)
		}
		for name := range st.Jobs {
			if !slices.Contains(names, name) {
				t.Errorf("round %s: the state file keeps job %q, which is not in the jobs file", round, name)
			}
		}
		if len(st.Runs) > len(names) {
			t.Errorf("round %s: the state file keeps %d runs for %d jobs, all with concurrency forbid", round, len(st.Runs), len(names))
		}
		for id, r := range st.Runs {
			if !slices.Contains(names, r.Job) {
				t.Errorf("round %s: the state file keeps run %s of job %q, which is not in the jobs file", round, id, r.Job)
			}
		}
		sizes = append(sizes, len(b))
	}

	args := []string{"server", "--data", data, "--jobs", jobsPath, "--listen", "127.0.0.1:0"}
	names := write("r0")
	srv := startApollo(t, args...)
	tasks := func(job, status string) []string {
		var ids []string
		for cursor := ""; ; {
			var page apiclient.TaskPage
			apiGet(t, srv.addr, "/api/v1/tasks?limit=1000&prefix="+job+"@&status="+status+"&cursor="+url.QueryEscape(cursor), &page)
			for _, tk := range page.Tasks {
				ids = append(ids, tk.TaskID)
			}
			if cursor = page.Next; cursor == "" {
				return ids
			}
		}
	}
	resp, err := http.Post("http://"+srv.addr+"/api/v1/jobs/held_job/pause", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pause of held_job answered %d", resp.StatusCode)
	}
	// held_job is due every second from the start: on a loaded machine it
	// may have run before the pause came. What ran after it is the fault.
	var beforePause []string
	eventually(t, 30*time.Second, "held_job's runs before its pause ended", func() bool {
		beforePause = tasks("held_job", "")
		j := jobsOf(srv)["held_job"]
		return j.Running == 0 && (j.LastTaskID == "" || slices.Contains(beforePause, j.LastTaskID))
	})
	for round := range 5 {
		if round > 0 {
			names = write(fmt.Sprintf("r%d", round)) // a start on another jobs file
			srv = startApollo(t, args...)
		}
		ranSince(srv, names, nil)
		// A reload takes this round's jobs away and puts others in.
		names = write(fmt.Sprintf("r%db", round))
		before := jobsOf(srv)
		srv.cmd.Process.Signal(syscall.SIGHUP)
		ranSince(srv, names, before)
		srv.kill()
		checkState(fmt.Sprintf("r%db", round), names)
	}
	// What a job takes there (its last tick, a pause, a run in progress)
	// is about 250 bytes at most.
	if slices.Max(sizes) > 300*len(names) {
		t.Errorf("the state file grew over the rounds: %v bytes, for %d jobs", sizes, len(names))
	}

	// The scheduler on that file: held_job still paused and never run,
	// the others run, and each run a kill left is settled (failed, lost),
	// none left running.
	srv = startApollo(t, args...)
	ranSince(srv, names, nil)
	if j := jobsOf(srv)["held_job"]; !j.Paused || j.LastTaskID != "" && !slices.Contains(beforePause, j.LastTaskID) {
		t.Errorf("held_job, paused in the first round: paused = %v, last run %q (before the pause: %q)", j.Paused, j.LastTaskID, beforePause)
	}
	if ids := tasks("held_job", ""); !slices.Equal(ids, beforePause) {
		t.Errorf("held_job, paused in the first round, ran: %q (before the pause: %q)", ids, beforePause)
	}
	var failed, running []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hang_job's runs: failed %q, running %q", failed, running)
		}
	})
	eventually(t, 30*time.Second, "the runs of hang_job the kills left settled", func() bool {
		failed, running = tasks("hang_job", "failed"), tasks("hang_job", "running")
		return len(failed) == 5 && len(running) == 1
	})
}
