package main

import (
	"fmt"
	"testing"
)

// With two alert processes (the HA pair, or one being upgraded beside the
// other), an ack sent as soon as an alert is shown is answered 200: the
// process that fired it acks it, and the other, which may not have
// evaluated it yet, no longer answers "not found" first. Before, the bus
// passed on the first reply, and the user was told 404 for an ack that
// was done.
func TestAckRightAfterFiringWithTwoAlertProcesses(t *testing.T) {
	// Nothing is told again within the test: a repeat of an alert before
	// its ack (more than 2s after its firing on a loaded machine) is not
	// what it looks for.
	d, h := startThreeProcesses(t, deployOptions{repeat: "1h"})
	d.startAlert() // the second
	src := map[string]string{}
	for round := range 3 {
		want := map[string]string{}
		for _, tenant := range tenants {
			rule := fmt.Sprintf("%s_r%d", tenant, round)
			src[tenant] += fmt.Sprintf("RULE %s task_prefix: \"r%d_\" WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n", rule, round)
			d.do(tenant, "PUT", "/api/v1/rules", src[tenant], nil, 200)
			d.fail(tenant, fmt.Sprintf("r%d_load", round))
			want[tenant] = rule
		}
		awaitTenants(t, h, "firing", want)
		for _, tenant := range tenants {
			a := d.firingAlert(tenant, want[tenant])
			d.do(tenant, "POST", "/api/v1/alerts/"+a.ID+"/ack", "", nil, 200)
		}
	}
}
