package bus

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/fullfile"

	"github.com/apollo-11/apollo"
)

// A full disk fails a write of the archive in the middle of a line; once
// there is room again the archive writes on: the next Sync succeeds, every
// task archived before, during and after the failure is found, and every
// line of the file reads. Before, the archive's buffered writer kept its
// first error for ever: every later Sync failed, so every checkpoint
// failed (the snapshot waits for the archive) and the log grew until a
// restart, and the tasks buffered at the failure were gone. A file size
// limit (RLIMIT_FSIZE) fails the write as a full disk does.
//
// Not parallel: the limit holds for the whole process.
func TestArchiveWritesOnAfterAFullDisk(t *testing.T) {
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	a, err := OpenFileArchive(dir, 0, clock)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	put := func(id, tenant string) {
		t.Helper()
		tk := &apollo.Task{TaskID: id, Tenant: tenant, Name: "job_" + strings.Repeat("x", 300), Status: apollo.StatusSuccess}
		if err := a.Put(tk); err != nil {
			t.Fatalf("Put %s: %v", id, err)
		}
	}
	put("before", "team-a")
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tasks-20261203.jsonl")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var syncErr error
	fullfile.Limit(t, uint64(fi.Size())+100, func() { // room for part of the next line
		for i := range 3 {
			put(fmt.Sprint("during-", i), "team-b")
		}
		syncErr = a.Sync()
	})
	if !errors.Is(syncErr, syscall.EFBIG) {
		t.Fatalf("a Sync past the limit: %v, want the limit's EFBIG", syncErr)
	}
	put("after", "team-a")
	if err := a.Sync(); err != nil {
		t.Fatalf("a Sync once there is room again: %v", err)
	}
	for _, k := range [][2]string{{"team-a", "before"}, {"team-b", "during-0"}, {"team-b", "during-2"}, {"team-a", "after"}} {
		if tk, err := a.Get(k[0], k[1]); err != nil || tk == nil {
			t.Errorf("task %s of %s: %v, %v", k[1], k[0], tk, err)
		}
	}
	if tk, _ := a.Get("team-a", "during-0"); tk != nil {
		t.Error("team-b's task found for team-a")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		var tk apollo.Task
		if err := json.Unmarshal(sc.Bytes(), &tk); err != nil {
			t.Errorf("line %d does not read: %v", lines, err)
		}
	}
	if lines != 5 {
		t.Errorf("%d lines in the archive, want 5", lines)
	}
}
