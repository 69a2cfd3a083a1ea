//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLeaseSpool(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if a.dir == b.dir {
		t.Fatalf("two processes share %s", a.dir)
	}
	// b leaves events behind and ends; a still runs. The next process
	// takes an empty slot for its own events, so that its client carries
	// only them, and sends b's through another; a's slot stays a's.
	os.MkdirAll(b.dir, 0o700)
	os.WriteFile(filepath.Join(b.dir, "0000000000000001-0000.ndjson"), []byte("{}\n"), 0o600)
	b.release()
	c, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if c.dir == a.dir || c.dir == b.dir || c.inherited || len(c.orphans) != 1 || c.orphans[0] != b.dir {
		t.Errorf("got slot %s (inherited %v) and orphans %v, want a third, empty one and [%s]", c.dir, c.inherited, c.orphans, b.dir)
	}
	// Once a has ended too, the next process takes the first slot, and
	// sends what b left in the other, free one.
	c.release()
	a.release()
	d, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if d.dir != a.dir || d.inherited || len(d.orphans) != 1 || d.orphans[0] != b.dir {
		t.Errorf("got slot %s (inherited %v) and orphans %v, want %s and [%s]", d.dir, d.inherited, d.orphans, a.dir, b.dir)
	}
	d.release()

	// Every free slot holds files: the first is the run's own, inherited,
	// and the others are orphans.
	root = t.TempDir()
	for i := range spoolSlots {
		dir := filepath.Join(root, fmt.Sprintf("slot-%02d", i))
		os.MkdirAll(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "0000000000000001-0000.ndjson"), []byte("{}\n"), 0o600)
	}
	e, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "slot-00"); e.dir != want || !e.inherited || len(e.orphans) != spoolSlots-1 {
		t.Errorf("got slot %s (inherited %v) and %d orphans, want %s inherited and %d", e.dir, e.inherited, len(e.orphans), want, spoolSlots-1)
	}
	e.release()

	// Every slot busy: no spool, said plainly.
	root = t.TempDir()
	var all []*spoolLease
	for range spoolSlots {
		l, err := leaseSpool(root)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	if _, err := leaseSpool(root); err == nil {
		t.Errorf("process %d got a slot", spoolSlots+1)
	}
	for _, l := range all {
		l.release()
	}
}

// TestExecSaysWhatAnotherTokenLeftInTheSpool: events apollo exec spooled
// under one token (tenant a's, or a token since rotated) are sent only by
// a run with that token; a run with another token must say they wait and
// what to do, not leave them there unseen for ever, and must not send them.
func TestExecSaysWhatAnotherTokenLeftInTheSpool(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	root := t.TempDir()
	execAs := func(server string, tn sdkTenant, task string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"exec", "--server", server, "--token", tn.agent, "--spool", root,
			"--name", "job", "--task", task, "--", "true"}, strings.NewReader(""), &out, &errb)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", task, code, errb.String())
		}
		return errb.String()
	}
	// Tenant a's run cannot reach the server: its events wait in a's part
	// of the spool.
	execAs("http://127.0.0.1:1", tenants[0], "a-1")
	aDir := filepath.Join(root, spoolPartition(tenants[0].agent))
	if !hasSpoolFiles(aDir) {
		t.Fatalf("nothing spooled in %s", aDir)
	}
	errOut := execAs("http://"+addr, tenants[1], "b-1")
	if !strings.Contains(errOut, "reported with another token wait in "+aDir) || !strings.Contains(errOut, "application/x-ndjson") {
		t.Errorf("tenant b's run did not say what waits in %s:\n%s", aDir, errOut)
	}
	if _, ok := sdkTasks(t, addr, tenants[1])["a-1"]; ok {
		t.Fatal("tenant a's run was sent into tenant b")
	}
	execAs("http://"+addr, tenants[0], "a-2")
	if _, ok := sdkTasks(t, addr, tenants[0])["a-1"]; !ok {
		t.Fatal("tenant a's next run did not send a-1")
	}
	if errOut := execAs("http://"+addr, tenants[1], "b-2"); errOut != "" {
		t.Errorf("nothing waits any more, yet:\n%s", errOut)
	}
}

// hasSpoolFiles reports whether any slot under a token's directory holds
// a spool file.
func hasSpoolFiles(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "slot-*", "*.ndjson"))
	return len(files) > 0
}
