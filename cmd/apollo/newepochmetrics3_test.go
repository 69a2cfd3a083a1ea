package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
)

// Three processes: the bus killed and started on a new, empty data
// directory (its disk replaced) knows none of the old log's counts, and
// the metrics it writes to Redis must not replace them. Each tenant's rate
// alert (a failure inside its 10-minute window) stays firing when acme's
// job reports a success to the new bus, and when globex's does after the
// bus is killed and started again on the new directory; no success is
// counted twice (a rule on two successes would fire), and nothing is told
// but what each step makes news. Before, the new bus wrote acme's whole
// 10-minute blocks as the old bus had: acme's failure was gone from Redis
// and acme_rate was told resolved, while globex's stayed firing.
func TestThreeProcessBusOnANewDataDirectoryKeepsTheCounts(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{repeat: "1h"})
	rates := map[string]string{}
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_rate task_prefix: "%[1]s_load" WINDOW: 10m THRESHOLD: failed >= 1 NOTIFY: hook
RULE %[1]s_ok task_prefix: "%[1]s_load" WINDOW: 10m THRESHOLD: success >= 1 NOTIFY: hook
RULE %[1]s_twice task_prefix: "%[1]s_load" WINDOW: 10m THRESHOLD: success >= 2 NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant), nil, 200)
		rates[tenant] = tenant + "_rate"
	}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", rates)
	ids := map[string]string{}
	for _, tenant := range tenants {
		ids[tenant] = d.firingAlert(tenant, rates[tenant]).ID
	}

	d.api.kill()
	d.args[4] = filepath.Join(d.dir, "new-data") // --data
	d.api = startCmd(t, exec.Command(os.Args[0], d.args...), apiclient.ReadyPrefix)
	// acme's success reaches Redis and is evaluated (acme_ok fires);
	// acme's failure is still counted: acme_rate is not told resolved,
	// then or after.
	d.succeed("acme", "acme_load", "acme_load-ok")
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_ok"})
	d.onlySentinelsTold(h)

	// Killed and started again on the new directory, the bus writes
	// where it wrote before: acme's success is not counted twice, and
	// globex's success, once evaluated, leaves globex's failure counted.
	d.crash()
	d.succeed("globex", "globex_load", "globex_load-ok")
	awaitTenants(t, h, "firing", map[string]string{"globex": "globex_ok"})
	d.onlySentinelsTold(h)
	for _, tenant := range tenants {
		if a := d.firingAlert(tenant, rates[tenant]); a.ID != ids[tenant] {
			t.Errorf("%s's %s shown as %s after the bus's new data directory, was %s", tenant, rates[tenant], a.ID, ids[tenant])
		}
	}
}
