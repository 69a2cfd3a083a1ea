package sched

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	s := started(t, `
jobs:
  - name: a
    schedule: "0 * * * *"
    command: [x]
`, Options{Clock: clock, Reporter: flushingRecorder{rec}, Logger: quietLogger(), StateDir: dir}, runner)
	if !clock.BlockUntil(1, wait) {
		t.Fatal("the loop armed no timer")
	}
	at := s.Jobs()[0].Next
	clock.Set(at)
	runner.next(t).exit(0)
	rec.waitFor(t, sid("a", at, 1), apollo.StatusSuccess)
	// The clock stays before the next tick: the loop saves nothing more.
	awaitStateWithout(t, dir, `"runs"`, "a run that ended and was delivered")
}

// A run that the last scheduler left in progress stays in the state file
// until its settling event is delivered, as a run that ends does: a second
// kill -9 in the moments after the start, the settling event still in the
// reporter's memory, had the run already gone from the file, so nothing
// settled it again and the server showed it running until its timeout.
func TestSettledRunStaysUntilDelivered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const id = "a@20240101T000000Z#1"
	left := `{"version":1,"runs":{"` + id + `":{"job":"a","attempt":1,"seq":3,"started":true}}}`
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(left), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "jobs:\n  - name: a\n    schedule: \"@yearly\"\n    command: [x]\n"
	clock := apollo.NewFakeClock(t0)
	rec := newRecorder()
	rep := &slowFlusher{recorder: rec, release: make(chan struct{})}
	started(t, src, Options{Clock: clock, Reporter: rep, Logger: quietLogger(), StateDir: dir}, newFakeRunner(clock))
	rec.waitFor(t, id, apollo.StatusFailed)
	// What a kill -9 now leaves: the settling event sent, not delivered.
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil || !strings.Contains(string(b), id) {
		t.Fatalf("the settled run left the state file before its event was delivered: %s %v", b, err)
	}
	// The next scheduler on what the kill left settles the run again.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, stateFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rec2 := newRecorder()
	started(t, src, Options{Clock: clock, Reporter: rec2, Logger: quietLogger(), StateDir: dir2}, newFakeRunner(clock))
	rec2.waitFor(t, id, apollo.StatusFailed)
	// Once delivered, the run leaves the file.
	close(rep.release)
	awaitStateWithout(t, dir, id, "the settled run, its event delivered")
}
