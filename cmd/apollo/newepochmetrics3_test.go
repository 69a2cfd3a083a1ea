package main

import (
	"path/filepath"
	"testing"
	"time"
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
	rates, ids := d.firingRateAlerts(h, `RULE %[1]s_ok task_prefix: "%[1]s_load" WINDOW: 10m THRESHOLD: success >= 1 NOTIFY: hook
RULE %[1]s_twice task_prefix: "%[1]s_load" WINDOW: 10m THRESHOLD: success >= 2 NOTIFY: hook
`)

	d.api.kill()
	d.startBusOn(filepath.Join(d.dir, "new-data"))
	// acme's success reaches Redis and is evaluated (acme_ok fires);
	// acme's failure is still counted: acme_rate is not told resolved,
	// then or after.
	d.succeed("acme", "acme_load", "acme_load-ok")
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_ok"})
	d.onlySentinelsTold(h)

	// Killed and started again on the new directory, the bus writes
	// where it wrote before: acme's success is not counted twice, and
	// globex's success, once evaluated, leaves globex's failure counted.
	// The alert process is killed once its deliveries are recorded as
	// done: the webhook hands a message to the test before it answers,
	// and one killed before it heard the answer is sent again (at least
	// once) by the restarted process, at once since it proves the killed
	// one dead; before, 15 s later, after the test's end.
	eventually(t, time.Minute, "the deliveries recorded as done", func() bool { return d.owedNow() == 0 })
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
