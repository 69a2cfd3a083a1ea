package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/notify/webhook"
)

// Three processes: the bus killed and started on a new, empty data
// directory writes the change log under a new epoch (its LSNs start
// over). The alert process, restarted before on the old log's mark,
// forgets the LSNs it heard, and nothing else: each tenant's rate alert,
// firing before, is shown by the new bus as the same firing episode and
// not told again, a failure of the new log (an LSN below the old mark)
// is told in each tenant, and a restart of the alert process afterwards
// tells nothing again. With the alert process given no forget, the new
// log's failures were passed over as heard.
func TestThreeProcessBusOnANewDataDirectoryKeepsTheAlerts(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{repeat: "1h"})
	rates, ids := d.firingRateAlerts(h, `RULE %[1]s_failed task_prefix: "%[1]s_lost" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`)
	d.awaitResolvedPastDedup(d.onlySentinelsTold(h)) // the alert process hears the bus
	// Restarted, the alert process holds the old log's mark it loaded:
	// the new log's first LSNs are below it.
	d.alert.kill()
	d.startAlertWith("")

	d.api.kill()
	// Down long enough for the alert process to say so: nothing else is
	// told meanwhile.
	h.await(t, 30*time.Second, "bus down", func(p webhook.ApolloPayload) bool {
		if p.Kind != apollo.NotifySelf {
			t.Fatalf("a %s notification of %s/%s while the bus was down", p.Kind, p.Alert.Tenant, p.Alert.Rule)
		}
		return strings.Contains(p.Alert.Rule, "apollo_component_down:bus")
	})
	d.startBusOn(filepath.Join(d.dir, "new-data"))

	// The alerts the alert process holds are shown by the new bus as
	// they were: the same episodes, firing.
	for _, tenant := range tenants {
		if a := d.firingAlert(tenant, rates[tenant]); a.ID != ids[tenant] {
			t.Errorf("%s's %s shown as %s after the bus's new data directory, was %s", tenant, rates[tenant], a.ID, ids[tenant])
		}
	}
	// A failure of the new log (LSNs from 1 again) is news; nothing
	// else is told, the rate alerts not again.
	lost := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost")
		lost[tenant] = tenant + "_failed"
	}
	awaitTenants(t, h, "firing", lost)
	d.awaitResolvedPastDedup(lost) // saved by the alert process, once it leads
	// Nor after a restart of the alert process on the new log's mark.
	d.alert.kill()
	d.startAlertWith("")
	for _, tenant := range tenants {
		if a := d.firingAlert(tenant, rates[tenant]); a.ID != ids[tenant] {
			t.Errorf("%s's %s shown as %s after the alert process's restart, was %s", tenant, rates[tenant], a.ID, ids[tenant])
		}
	}
	d.onlySentinelsTold(h)
}

// firingRateAlerts gives each tenant a rate rule, <tenant>_rate, that one
// failure of <tenant>_load fires within 10 minutes, a sentinel rule
// (onlySentinelsTold) and the rules of more (a format of the tenant as
// %[1]s); it fails each tenant's load once and waits for both rate alerts
// to fire. It returns the rules and their firing alerts' IDs by tenant.
func (d *deployment) firingRateAlerts(h *hook, more string) (rates, ids map[string]string) {
	d.t.Helper()
	rates, ids = map[string]string{}, map[string]string{}
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_rate task_prefix: "%[1]s_load" WINDOW: 10m THRESHOLD: failed >= 1 NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`+more, tenant), nil, 200)
		rates[tenant] = tenant + "_rate"
	}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(d.t, h, "firing", rates)
	for _, tenant := range tenants {
		ids[tenant] = d.firingAlert(tenant, rates[tenant]).ID
	}
	return rates, ids
}

// startBusOn starts the bus (its process was killed) on the data
// directory data instead of the one it had.
func (d *deployment) startBusOn(data string) {
	d.t.Helper()
	i := slices.Index(d.args, "--data")
	if i < 0 {
		d.t.Fatalf("no --data in %q", d.args)
	}
	d.args[i+1] = data
	d.api = startCmd(d.t, exec.Command(os.Args[0], d.args...), apiclient.ReadyPrefix)
}
