package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// holdFailed is a live observer, first in line, that holds every change
// to failed for good, once it has written a file named after the task in
// dir: the process is killed before the event rules hear of it.
type holdFailed string

func (h holdFailed) Apply(c *apollo.Change) {
	if c.Task.Status != apollo.StatusFailed {
		return
	}
	os.WriteFile(filepath.Join(string(h), c.Task.Tenant+"_"+c.Task.TaskID), nil, 0o600)
	select {}
}

// A failure accepted just before a kill -9, which the event rules had not
// heard of yet, is told after the restart, once, in each tenant; a second
// kill -9 after it was told does not tell it again. Before, a change was
// durable before the workers handed it to the event rules and the replay
// never did: its ON: failed rule never fired (docs/architecture.md,
// "Replay rebuilds state; it is not news").
func TestFailureAcceptedJustBeforeAKillIsTold(t *testing.T) {
	failureHeldBeforeTheKillIsToldOnce(t, false, "the event rules")
}

// failureHeldBeforeTheKillIsToldOnce holds each tenant's failure between
// its acceptance and the event rules (before, in the three-process mode,
// the change feed: held names where), kills every process, and expects
// the failure told once after the restart and not again after a second
// kill -9.
func failureHeldBeforeTheKillIsToldOnce(t *testing.T, threeProcesses bool, held string) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, threeProcesses, h, deployOptions{})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.putLostRules("_failed")
	dir := t.TempDir()
	d.env = []string{"APOLLO_TEST_HOLD_FAILED=" + dir}
	d.crash() // the rules are saved; this start holds the failures
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost") // answered accepted
		want[tenant] = tenant + "_failed"
	}
	eventually(t, 30*time.Second, "both failures held before "+held, func() bool {
		files, _ := os.ReadDir(dir)
		return len(files) == len(tenants)
	})
	d.crash()
	awaitTenants(t, h, "firing", want)
	d.awaitResolvedPastDedup(want)
	d.crash()
	d.onlySentinelsTold(h) // fails on a second notification of the failures told after the first restart
}
