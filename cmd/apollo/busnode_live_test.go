package main

import (
	"os"
	"testing"

	"github.com/apollo-11/apollo/internal/testwait"
)

// Scale-out: a failure a node accepted and a kill -9 of the node took
// before its change feed wrote it to Redis is told once in each tenant,
// after another node takes the partitions over, and not again when that
// node is killed and restarted. Before, a node's feed carried no mark:
// the change was durable in the partition's decision log and never reached
// the event rules of the alert processes (docs/architecture.md, "A
// scale-out node keeps the promise per partition").
func TestBusNodeFailureAcceptedJustBeforeAKillIsTold(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{})
	url := startNATS(t).ClientURL()
	node := func(id string) []string {
		return []string{"bus", "--config", d.args[2], "--nats", url, "--partitions", "2", "--node-id", id, "--listen", "127.0.0.1:0"}
	}
	d.args = node("first")
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	servedWhenReady(t, d.api.addr)
	d.putLostRules("_failed")
	d.awaitResolvedPastDedup(d.onlySentinelsTold(h)) // the alert process hears the node
	dir := t.TempDir()
	d.env = []string{"APOLLO_TEST_HOLD_FAILED=" + dir}
	d.crash() // this start holds the failures
	servedWhenReady(t, d.api.addr)
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost") // answered accepted
		want[tenant] = tenant + "_failed"
	}
	eventually(t, testwait.Timeout(t), "both failures held before the change feed", func() bool {
		files, _ := os.ReadDir(dir)
		return len(files) == len(tenants)
	})
	d.args = node("second") // takes the partitions over once the first's leases expire
	d.crash()
	servedWhenReady(t, d.api.addr)
	awaitTenants(t, h, "firing", want)
	d.awaitResolvedPastDedup(want)
	d.crash() // the same node again: it waits for its old registration to expire
	servedWhenReady(t, d.api.addr)
	d.onlySentinelsTold(h) // fails on a second notification of the failures told after the takeover
}
