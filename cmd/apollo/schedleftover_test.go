package main

import (
	"os"
	"path/filepath"
	"testing"
)

// apollo sched removes from its state directory the temporary file that
// a kill -9 in the middle of a state write leaves (the state file is
// replaced whole: a temporary file, synced, renamed). Before, only
// apollo server cleaned its own DATA/sched, and every such kill of apollo
// sched left one more file in --state for good. What is not such a file
// stays.
func TestSchedRemovesTheTempFilesAKillLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	os.WriteFile(jobs, []byte("jobs:\n  - {name: yearly_job, schedule: \"@yearly\", command: [\"true\"]}\n"), 0o600)
	state := filepath.Join(dir, "sched")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(state, ".sched-state.json.tmp2718281828")
	mine := filepath.Join(state, "notes.txt")
	for _, f := range []string{left, mine} {
		if err := os.WriteFile(f, []byte(`{"version": 1, "jobs": {"yea`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sched := startProc(t, "apollo sched: ", "sched", "--jobs", jobs, "--server", "http://"+freeAddr(t), "--state", state)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the temporary file a kill left is still in the state directory (%v):\n%s", err, sched.out)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file that is not the scheduler's was removed: %v", err)
	}
	sched.term(t)
}
