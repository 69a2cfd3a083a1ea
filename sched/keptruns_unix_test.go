//go:build unix

package sched

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// DropKeptRuns takes out the runs named, and only those: the runs of two
// owners (two tenants' tokens) are listed, one is dropped, the other
// stays. A drop by a user who does not own the state file is refused and
// changes nothing: the file it wrote would be that user's, mode 0600,
// unreadable by the scheduler at its next start.
func TestDropKeptRunsOfOneOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &stateFile{dir: dir}
	err := f.save(savedState{Jobs: map[string]savedJob{}, Runs: map[string]savedRun{
		"a@20261205T070000Z#1": {Job: "a", Attempt: 1, Seq: 3, Started: true, Owner: "token aaaa"},
		"b@20261205T070000Z#1": {Job: "b", Attempt: 1, Seq: 2, Owner: "token bbbb"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := KeptRuns(dir)
	if err != nil || len(runs) != 2 || runs[0].Owner != "token aaaa" || !runs[0].Started || runs[1].Owner != "token bbbb" {
		t.Fatalf("KeptRuns: %+v, %v", runs, err)
	}
	if os.Geteuid() == 0 {
		// root: give the file to another user, as a scheduler running as
		// apollo has it.
		if err := os.Chown(f.path(), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(f.path())
		if _, err := DropKeptRuns(dir, []string{"a@20261205T070000Z#1"}); err == nil || !strings.Contains(err.Error(), "scheduler's user") {
			t.Fatalf("a drop by root of a file another user owns: %v, want refused", err)
		}
		fi, _ := os.Stat(f.path())
		if after, _ := os.ReadFile(f.path()); string(after) != string(before) || fileUID(fi) != 65534 {
			t.Fatalf("a refused drop changed the file (owner %d):\n%s", fileUID(fi), after)
		}
		if err := os.Chown(f.path(), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	dropped, err := DropKeptRuns(dir, []string{"a@20261205T070000Z#1"})
	if err != nil || len(dropped) != 1 || dropped[0].Job != "a" {
		t.Fatalf("DropKeptRuns: %+v, %v", dropped, err)
	}
	st, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Runs["b@20261205T070000Z#1"]; len(st.Runs) != 1 || !ok {
		t.Fatalf("after the drop the file keeps %+v, want b's run alone", st.Runs)
	}
}

func fileUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
