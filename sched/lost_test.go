package sched

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// A run that ended and whose events are delivered leaves the state file
// at once, in a save of its own, not at the loop's next save, which for an
// hourly job is an hour away: a kill -9 meanwhile had the next start
// settle it as lost (TestADeliveredRunIsNotSettledAfterKill in cmd/apollo).
func TestDeliveredRunLeavesTheStateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(t0)
	rec, runner := newRecorder(), newFakeRunner(clock)
	s, err := newScheduler(mustParse(t, `
jobs:
  - name: a
    schedule: "0 * * * *"
    command: [x]
`), Options{Clock: clock, Reporter: flushingRecorder{rec}, Logger: quietLogger(), StateDir: dir}, runner)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Stop(ctx)
	}()
	if !clock.BlockUntil(1, wait) {
		t.Fatal("the loop armed no timer")
	}
	at := s.Jobs()[0].Next
	clock.Set(at)
	runner.next(t).exit(0)
	rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	// The clock stays before the next tick: the loop saves nothing more.
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(filepath.Join(dir, stateFileName))
		if err == nil && !strings.Contains(string(b), `"runs"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a run that ended and was delivered is still in the state file %v later: %s %v", wait, b, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the file: nothing to wait on
	}
}
