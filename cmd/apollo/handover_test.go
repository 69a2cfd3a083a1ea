package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// holdSend holds for good a notification of a rule whose name ends in
// _held, once it has created a file named after its tenant and rule in
// dir, holding the process's PID: the engine has decided it (and marked
// its alert told, and taken its dedup lock) but the dispatcher, and so
// the outbox, never gets it before the process is killed. Only the first
// of the processes sharing dir to hand it on is held: the one that takes
// it over from a killed one sends it.
type holdSend string

func (h holdSend) hold(n apollo.Notification) {
	if strings.HasSuffix(n.Alert.Rule, "_held") {
		holdOnce(filepath.Join(string(h), n.Alert.Tenant+"_"+n.Alert.Rule))
	}
}

// holdLock is holdSend before the dedup lock: it holds for good the first
// ask for the lock of a notification of a rule whose name ends in _held
// (the engine has decided it and marked its alert told).
type holdLock string

func (h holdLock) hold(key string) {
	if strings.Contains(key, "_held:") {
		holdOnce(filepath.Join(string(h), strings.NewReplacer(":", "_", "/", "_").Replace(key)))
	}
}

// holdOnce blocks for good if it creates file, which then holds the
// process's PID; it returns at once if file exists.
func holdOnce(file string) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprint(f, os.Getpid())
	f.Close()
	select {}
}

// heldBy returns the PIDs that hold something in dir (holdOnce), once
// it holds n files.
func heldBy(t *testing.T, dir string, n int) map[int]bool {
	t.Helper()
	pids := map[int]bool{}
	eventually(t, 30*time.Second, fmt.Sprintf("%d notifications held in %s", n, dir), func() bool {
		files, _ := os.ReadDir(dir)
		if len(files) < n {
			return false
		}
		clear(pids)
		for _, f := range files {
			b, _ := os.ReadFile(filepath.Join(dir, f.Name()))
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				return false // being written
			}
			pids[pid] = true
		}
		return true
	})
	return pids
}

// A notification the engine decided on but had not yet handed to the
// dispatcher (its outbox) when the alert state was saved and the process
// was killed -9 is told after the restart, once, in each tenant. Before,
// the saved state said the alert's first message had gone out
// (FiringSent) while nothing held the message: the restart carried the
// alert on as told and nobody heard of the failure.
func TestNotificationDecidedBeforeAKillIsTold(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.putLostRules("_held")
	held := t.TempDir()
	d.env = []string{"APOLLO_TEST_HOLD_SEND=" + held}
	d.crash() // the rules are saved; this start holds the notifications
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost")
		want[tenant] = tenant + "_held"
	}
	// Both alerts fire; the first notification is held in the hand-over,
	// the second waits behind it.
	for _, tenant := range tenants {
		d.firingAlert(tenant, tenant+"_held")
	}
	eventually(t, 30*time.Second, "a notification held before the dispatcher", func() bool {
		files, _ := os.ReadDir(held)
		return len(files) > 0
	})
	// A silence is saved with the alerts before it is answered: the state
	// on disk now has both alerts, told or not.
	for _, tenant := range tenants {
		d.silence(tenant, fmt.Sprintf(`"prefix":%q`, tenant+"_other"))
	}
	d.crash()
	awaitTenants(t, h, "firing", want)
	d.awaitResolvedPastDedup(want)
	d.crash()
	d.onlySentinelsTold(h) // fails on a second notification of what was told after the first restart
}
