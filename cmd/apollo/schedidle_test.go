package main

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// An idle scheduler does not write its state file: here every job is
// paused (one in the file, one at run time through the API), their
// schedules pass every second, and the file, replaced whole at each
// write, keeps its inode over three ticks of each; across a kill -9 and
// a restart as well, which finds both pauses. Before, every tick of a
// paused job wrote the file (its last tick, which no catch-up reads: a
// paused job catches nothing up), an fsync a second for nothing.
func TestIdleSchedulerDoesNotWriteItsState(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	os.WriteFile(jobs, []byte(`jobs:
  - {name: held_in_file, schedule: "@every 1s", paused: true, command: ["true"]}
  - {name: held_at_run_time, schedule: "@every 1s", command: ["true"]}
`), 0o644)
	args := []string{"server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0"}
	state := filepath.Join(dir, "data", "sched", "sched-state.json")
	// Each write makes a new file: a new inode (which a later write may
	// take again) and a new modification time.
	written := func() [2]int64 {
		fi, err := os.Stat(state)
		if err != nil {
			t.Fatal(err)
		}
		return [2]int64{int64(fi.Sys().(*syscall.Stat_t).Ino), fi.ModTime().UnixNano()}
	}
	nexts := func(addr string) map[string]apollo.ScheduledJob {
		var list struct {
			Jobs []apollo.ScheduledJob `json:"jobs"`
		}
		if code := apiGet(t, addr, "/api/v1/jobs", &list); code != http.StatusOK {
			t.Fatalf("GET /api/v1/jobs: %d", code)
		}
		m := map[string]apollo.ScheduledJob{}
		for _, j := range list.Jobs {
			m[j.Name] = j
		}
		return m
	}
	// idle waits for three ticks of each job and says whether the file
	// was written meanwhile.
	idle := func(addr string) {
		t.Helper()
		before, first := written(), nexts(addr)
		eventually(t, 30*time.Second, "three ticks of each job", func() bool {
			now := nexts(addr)
			for name, j := range first {
				if !now[name].Paused || now[name].Next.Sub(j.Next) < 3*time.Second {
					return false
				}
			}
			return true
		})
		if after := written(); after != before {
			t.Errorf("the state file was written (inode and mtime %v, then %v) while every job was paused", before, after)
		}
	}

	srv := startApollo(t, args...)
	resp, err := http.Post("http://"+srv.addr+"/api/v1/jobs/held_at_run_time/pause", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pause: %v %v", resp, err)
	}
	resp.Body.Close()
	idle(srv.addr)
	srv.kill()

	srv = startApollo(t, args...)
	idle(srv.addr)
}
