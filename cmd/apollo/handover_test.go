package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// holdSend holds for good every notification of a rule whose name ends
// in _held, once it has written a file named after its tenant and rule in
// dir: the engine has decided it (and marked its alert told) but the
// dispatcher, and so the outbox, never gets it before the process is
// killed.
type holdSend string

func (h holdSend) hold(n apollo.Notification) {
	if !strings.HasSuffix(n.Alert.Rule, "_held") {
		return
	}
	os.WriteFile(filepath.Join(string(h), n.Alert.Tenant+"_"+n.Alert.Rule), nil, 0o600)
	select {}
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
