package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
)

// A restore made while the server still runs (the data directory moved
// away and a copy put in its place, against docs/operations.md's "stop the
// server"): the running server writes on in the files it has open, which
// are no longer in the data directory, and its next snapshot would land in
// the restored copy, with an LSN its log does not reach. It stops at its
// next checkpoint instead, says why, and writes nothing into the copy; a
// server started on the copy then has exactly what the copy held, per
// tenant. Before, it ran on, every event it accepted went into files that
// no longer had a name, and its snapshots went into the copy.
func TestServerStopsWhenItsDataDirectoryIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d := newDeployment(t, false, newHook(t), deployOptions{config: "snapshot_every: 1s\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	before := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_kept")
		before[tenant] = fmt.Sprintf("%s_kept-%d", tenant, d.seq.Load())
	}
	data := filepath.Join(d.dir, "data")
	backup := filepath.Join(d.dir, "backup")
	if out, err := exec.Command("cp", "-R", data, backup).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	after := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_after")
		after[tenant] = fmt.Sprintf("%s_after-%d", tenant, d.seq.Load())
	}
	// The restore, with the server running.
	if err := os.Rename(data, filepath.Join(d.dir, "data.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(backup, data); err != nil {
		t.Fatal(err)
	}
	snapsBefore, _ := filepath.Glob(filepath.Join(data, "wal", "*.snap"))
	listing := func() string {
		var b strings.Builder
		filepath.Walk(data, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				fmt.Fprintf(&b, "%s %d %v\n", p, fi.Size(), fi.ModTime().UnixNano())
			}
			return nil
		})
		return b.String()
	}
	copied := listing()
	select {
	case <-d.api.exited:
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("the server still runs %v after its data directory was replaced", testwait.Timeout(t))
	}
	if out := d.api.out.String(); d.api.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(out, "no longer the directory this log opened") {
		t.Fatalf("the server exited %d; want non-zero, saying its directory was replaced:\n%s", d.api.cmd.ProcessState.ExitCode(), out)
	}
	if now := listing(); now != copied {
		t.Errorf("the restored copy changed while the old server stopped:\n%s\nnow:\n%s", copied, now)
	}
	if snaps, _ := filepath.Glob(filepath.Join(data, "wal", "*.snap")); strings.Join(snaps, " ") != strings.Join(snapsBefore, " ") {
		t.Errorf("snapshots in the restored copy: %v, want only the copy's %v", snaps, snapsBefore)
	}
	d.start()
	for _, tenant := range tenants {
		var tk struct{ Status string }
		d.do(tenant, "GET", "/api/v1/tasks/"+before[tenant], "", &tk, http.StatusOK)
		if tk.Status != "failed" {
			t.Errorf("tenant %s: run %s from the copy is %q, want failed", tenant, before[tenant], tk.Status)
		}
		d.do(tenant, "GET", "/api/v1/tasks/"+after[tenant], "", nil, http.StatusNotFound)
	}
}
