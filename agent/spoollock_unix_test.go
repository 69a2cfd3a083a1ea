//go:build unix

package agent

import (
	"context"
	"os/exec"
	"testing"
)

// A closed client frees its spool directory even while a process forked
// at that moment still holds a copy of the lock's descriptor (a fork keeps
// every descriptor until its exec; the flock belongs to the open file):
// the next process's client refused the directory as in use until then.
// Here the child keeps its copy for good.
func TestCloseFreesTheSpoolWhileAChildHoldsTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	c1 := newTestClient(t, srv.URL(), WithSpoolDir(dir))
	child := exec.Command("sleep", "600")
	child.ExtraFiles = append(child.ExtraFiles, c1.spool.lock)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if err := c1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2, err := New(srv.URL(), quietLogger(), WithSpoolDir(dir))
	if err != nil {
		t.Fatalf("a client on the spool of a closed one: %v", err)
	}
	c2.Close(context.Background())
}
