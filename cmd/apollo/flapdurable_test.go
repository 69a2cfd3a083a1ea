package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo/redisstore"
)

// Three processes: a job that starts flapping while the alert process is
// down (killed -9) is told once the alert process is back, once in each
// tenant, and a kill -9 of the alert process afterwards does not tell it
// again. Before, the bus published flapping on the Redis channel
// <p>:findings alone, which keeps nothing for a process that does not
// listen: ON: flapping never fired.
func TestThreeProcessFlappingWhileTheAlertProcessIsDownIsTold(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})
	want := map[string]string{}
	for _, tenant := range tenants {
		want[tenant] = tenant + "_flapping"
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_flapping task_prefix: "%[1]s_flappy" ON: flapping GROUP_WINDOW: 1s NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant), nil, 200)
		d.putExpectations(tenant, fmt.Sprintf("expectations:\n  - job: %s_flappy\n    flapping: {changes: 2, window: 1h}\n", tenant))
	}
	d.awaitResolvedPastDedup(d.onlySentinelsTold(h)) // the alert process hears the bus
	d.alert.kill()
	for _, tenant := range tenants {
		job := tenant + "_flappy"
		d.succeed(tenant, job, job+"-ok-1")
		d.fail(tenant, job)
		d.succeed(tenant, job, job+"-ok-2")
	}
	// The bus has found the flapping and acted on it (it writes the held
	// jobs, a flapping job held by its own flapping, after it acted).
	c, err := redisstore.Open(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var held redisstore.Holder
	stop, err := held.Watch(testCtx(t, time.Minute), c, d.prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	timeout := time.After(30 * time.Second)
	for _, tenant := range tenants {
		job := tenant + "_flappy"
		for {
			changed := held.Changed()
			if slices.Equal(held.HeldBy(tenant, job), []string{job}) {
				break
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("%s held by %v, want by its own flapping", job, held.HeldBy(tenant, job))
			}
		}
	}
	d.startAlertWith("")
	awaitTenants(t, h, "firing", want)
	d.awaitResolvedPastDedup(want)
	d.alert.kill()
	d.startAlertWith("")
	d.onlySentinelsTold(h) // fails on the flapping told again
}
