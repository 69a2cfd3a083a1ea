package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Two alert processes (HA): a notification whose dedup lock one of them
// took, and which it had not yet recorded in its outbox when it was
// killed -9, is told once in each tenant: by the process that takes over
// from the dead one. Before, the lock held every other process back for
// the dedup window while the dead one had left no record of it anywhere:
// nobody told it (docs/redis.md, "The dedup lock and the outbox").
func TestThreeProcessKillAfterTheDedupLockIsTold(t *testing.T) {
	// A dedup window longer than the wait for a dead process's lease
	// (15 s): the lock, not its end, decides who tells.
	d, h := startThreeProcesses(t, deployOptions{dedup: "5m", repeat: "5m"})
	d.putLostRules("_held")
	held := t.TempDir()
	cfg := filepath.Join(d.dir, "apollo.yaml")
	holding := func() *proc {
		cmd := exec.Command(os.Args[0], "alert", "--config", cfg)
		cmd.Env = []string{"APOLLO_TEST_HOLD_SEND=" + held}
		p := startCmd(t, cmd, "apollo alert ")
		logOnFailure(t, p)
		return p
	}
	d.alert.kill()
	ps := []*proc{holding(), holding()}
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost")
		want[tenant] = tenant + "_held"
	}
	// Each tenant's notification is held, after its lock, by whichever
	// process took the lock; the other one was held back by it (or waits
	// behind its own held one).
	pids := heldBy(t, held, len(tenants))
	var survivor bool
	for _, p := range ps {
		if pids[p.cmd.Process.Pid] {
			p.kill()
		} else {
			survivor = true
		}
	}
	if !survivor { // both held one: a new process takes over
		logOnFailure(t, startProc(t, "apollo alert ", "alert", "--config", cfg))
	}
	awaitTenants(t, h, "firing", want)
	d.onlySentinelsTold(h) // fails on a second notification of the held ones
}

// One alert process, killed -9 after it decided each tenant's
// notification (the alerts are saved as told) and before it asked for
// the first one's dedup lock: the process started next tells both, once.
// Before, what the engine owed was only in its memory in the
// three-process mode: the saved state said told, and nobody told them.
func TestThreeProcessKillBeforeTheDedupLockIsTold(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{dedup: "5m", repeat: "5m"})
	d.putLostRules("_held")
	held := t.TempDir()
	cfg := filepath.Join(d.dir, "apollo.yaml")
	d.alert.kill()
	cmd := exec.Command(os.Args[0], "alert", "--config", cfg)
	cmd.Env = []string{"APOLLO_TEST_HOLD_LOCK=" + held}
	d.alert = startCmd(t, cmd, "apollo alert ")
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost")
		want[tenant] = tenant + "_held"
	}
	// The first is held before its lock, the second waits behind it;
	// both alerts are saved in Redis as firing (and told).
	heldBy(t, held, 1)
	for _, tenant := range tenants {
		d.firingAlert(tenant, tenant+"_held")
	}
	d.alert.kill()
	d.startAlertWith("")
	awaitTenants(t, h, "firing", want)
	d.onlySentinelsTold(h)
}

// logOnFailure logs the end of p's log if the test failed.
func logOnFailure(t *testing.T, p *proc) {
	t.Cleanup(func() {
		if t.Failed() {
			p.kill()
			out := p.out.String()
			t.Logf("%v (pid %d), the last 6 KiB of its log:\n%s", p.cmd.Args[1:], p.cmd.Process.Pid, out[max(0, len(out)-6<<10):])
		}
	})
}
