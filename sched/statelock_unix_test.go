//go:build unix

package sched

import (
	"context"
	"os/exec"
	"testing"

	apollo "github.com/apollo-11/apollo"
)

// A stopped scheduler frees its state directory even while a process
// forked at that moment still holds a copy of the lock's descriptor: a
// fork of another goroutine (a run starting, in a server that runs jobs)
// keeps every descriptor until its exec, and a flock belongs to the open
// file, so closing ours alone left the directory locked for that while
// and the next scheduler refused to start ("in use by another
// scheduler": TestPauseSurvivesRestart failed 1 run in 4 under load).
// Here the child keeps its copy for good.
func TestStopFreesTheStateDirWhileAChildHoldsTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "jobs:\n  - name: a\n    schedule: \"@yearly\"\n    command: [x]\n"
	clock := apollo.NewFakeClock(t0)
	s, err := newScheduler(mustParse(t, src), Options{Clock: clock, Reporter: newRecorder(), Logger: quietLogger(), StateDir: dir}, newFakeRunner(clock))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "600")
	child.ExtraFiles = append(child.ExtraFiles, s.stateLock)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	started(t, src, Options{Clock: clock, Reporter: newRecorder(), Logger: quietLogger(), StateDir: dir}, newFakeRunner(clock))
}
