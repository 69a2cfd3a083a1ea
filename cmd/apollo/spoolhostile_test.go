//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSpoolSkipsWhatIsNotASpoolFile: a FIFO or a symlink named like a
// spool file in apollo exec's spool (left by a careless script, or planted)
// is not a file of events. apollo exec opened every one to look at it
// before the job ran, and opening a FIFO waits for a writer: the cron job
// never ran, and SIGTERM did not end it. apollo spool list hung the same
// way, and read a symlink to /dev/zero for ever. Both must skip them, as
// the agent does, and the job must run and be reported.
func TestSpoolSkipsWhatIsNotASpoolFile(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	root := t.TempDir()
	// Tenant b's part holds a FIFO and a symlink to an endless file.
	bPart := filepath.Join(root, spoolPartition(tenants[1].agent))
	for _, slot := range []string{"slot-00", "slot-01"} {
		if err := os.MkdirAll(filepath.Join(bPart, slot), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bPart, slot+".lock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(bPart, "slot-00", "0000000000000001-0000.ndjson")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Should the command block on the FIFO after all, a writer lets it go
	// so that the test ends.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	if err := os.Symlink("/dev/zero", filepath.Join(bPart, "slot-01", "0000000000000002-0000.ndjson")); err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) (int, string, string) {
		t.Helper()
		type result struct {
			code     int
			out, err string
		}
		done := make(chan result, 1)
		go func() {
			var out, errb bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
			done <- result{code, out.String(), errb.String()}
		}()
		select {
		case r := <-done:
			return r.code, r.out, r.err
		case <-time.After(20 * time.Second):
			t.Fatalf("apollo %s did not end in 20 s", strings.Join(args[:2], " "))
		}
		return 0, "", ""
	}
	for _, tn := range tenants {
		code, out, errOut := cli("exec", "--server", "http://"+addr, "--token", tn.agent, "--spool", root,
			"--name", "job", "--task", tn.name+"-1", "--", "echo", "ran")
		if code != 0 || out != "ran\n" {
			t.Fatalf("exec as %s: exit %d, stdout %q: %s", tn.name, code, out, errOut)
		}
		if _, ok := sdkTasks(t, addr, tn)[tn.name+"-1"]; !ok {
			t.Fatalf("%s-1 is not in tenant %s", tn.name, tn.name)
		}
	}
	for _, tn := range tenants {
		code, out, errOut := cli("spool", "list", "--spool", root, "--token", tn.agent)
		if code != 0 || !strings.Contains(out, "nothing waits") {
			t.Fatalf("spool list as %s: exit %d: %s%s", tn.name, code, out, errOut)
		}
	}
	code, out, errOut := cli("spool", "send", "--spool", root, "--server", "http://"+addr, "--token", tenants[1].agent)
	if code != 0 {
		t.Fatalf("spool send as b: exit %d: %s%s", code, out, errOut)
	}
	// Nothing of ours was deleted or replaced.
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO: %v, %v", fi, err)
	}
}
