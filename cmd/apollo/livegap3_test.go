package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// putLostRules gives each tenant an event rule <tenant><rule> on
// <tenant>_lost failures and one on <tenant>_sentinel failures
// (onlySentinelsTold).
func (d *deployment) putLostRules(rule string) {
	d.t.Helper()
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s%[2]s task_prefix: "%[1]s_lost" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant, rule), nil, 200)
	}
}

// Three processes: a failure the bus accepted and a kill -9 of the bus
// took before the change feed wrote it to Redis is told after the
// restart, once, in each tenant, and not again after another kill -9.
// Before, the feed was a Redis channel fed from memory: the change was
// durable in the bus's log and never reached the event rules of the
// alert processes (docs/architecture.md, "What the event rules had not
// heard of is news after a crash").
func TestThreeProcessFailureAcceptedJustBeforeABusKillIsTold(t *testing.T) {
	failureHeldBeforeTheKillIsToldOnce(t, true, "the change feed")
}

// Three processes: failures the bus applies while the alert process is
// down are told once it is back, once in each tenant, and a kill -9 of
// the alert process afterwards does not tell them again. Before, the
// feed was a Redis channel, which keeps nothing for a process that does
// not listen.
func TestThreeProcessFailuresWhileTheAlertProcessIsDownAreTold(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})
	d.putLostRules("_failed")
	d.awaitResolvedPastDedup(d.onlySentinelsTold(h)) // the alert process hears the bus
	sent := d.feedSent()
	d.alert.kill()
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost")
		want[tenant] = tenant + "_failed"
	}
	// Written to Redis by the bus's change feed while no alert process
	// runs (a run's start and its failure, in each tenant).
	eventually(t, 30*time.Second, "the failures fed to Redis", func() bool { return d.feedSent() >= sent+2*int64(len(tenants)) })
	d.startAlertWith("")
	awaitTenants(t, h, "firing", want)
	d.awaitResolvedPastDedup(want)
	d.alert.kill()
	d.startAlertWith("")
	d.onlySentinelsTold(h)
}

// feedSent is how many changes the bus's change feed has written to Redis.
func (d *deployment) feedSent() int64 {
	d.t.Helper()
	var sys struct {
		ChangeFeed struct{ Sent int64 }
	}
	d.do("", "GET", "/api/v1/system", "", &sys, 200)
	return sys.ChangeFeed.Sent
}

// Two alert processes (HA): the one that does not lead is killed, the
// failures sent meanwhile are told once by the other, and the killed one,
// restarted, reads the change log on from the state the leader saved and
// tells them no second time (the dedup window is 1 s here: the lock
// cannot be what holds them back once the state was saved).
func TestThreeProcessHAAlertRestartTellsOnce(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})
	d.putLostRules("_failed")
	cfg := filepath.Join(d.dir, "apollo.yaml")
	other := startProc(t, "apollo alert ", "alert", "--config", cfg)
	t.Cleanup(other.kill)
	c, _ := redistest.Client(t)
	host, _ := os.Hostname()
	var follower *proc
	eventually(t, 30*time.Second, "a leader among the alert processes", func() bool {
		id, _ := redisstore.Leader(context.Background(), c, d.prefix)
		switch id {
		case host + "-" + strconv.Itoa(d.alert.cmd.Process.Pid):
			follower = other
		case host + "-" + strconv.Itoa(other.cmd.Process.Pid):
			follower = d.alert
		}
		return follower != nil
	})
	d.awaitResolvedPastDedup(d.onlySentinelsTold(h)) // both hear the bus; the dedup lock tells each once
	follower.kill()
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_lost")
		want[tenant] = tenant + "_failed"
	}
	awaitTenants(t, h, "firing", want)
	for _, tenant := range tenants { // saved by the leader, with what it heard
		eventually(t, 30*time.Second, tenant+"'s alert saved", func() bool {
			var l struct{ Alerts []apollo.Alert }
			d.do(tenant, "GET", "/api/v1/alerts?state=resolved", "", &l, 200)
			for _, a := range l.Alerts {
				if a.Rule == want[tenant] && time.Since(a.ResolvedAt) > 2*time.Second {
					return true
				}
			}
			return false
		})
	}
	restarted := startProc(t, "apollo alert ", "alert", "--config", cfg)
	t.Cleanup(restarted.kill)
	d.onlySentinelsTold(h) // fails on a second notification of the _lost failures
}
