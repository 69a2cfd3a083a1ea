package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// An alert process killed with SIGKILL and started again on the same
// host leads at once: its lease names the dead process (host, boot, PID
// namespace, PID, start time), which the new one proves dead. Before, the
// new one led only once the dead one's lease ran out (15 s): until then
// nobody saved the alerts, and the bus showed none of what fired. A
// second process on the same host while the first lives does not lead.
func TestThreeProcessAlertRestartLeadsAtOnce(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})
	d.setEventRules()
	c, _ := redistest.Client(t)
	ctx := context.Background()
	host, _ := os.Hostname()
	idOf := func(p *proc) string { return host + "-" + strconv.Itoa(p.cmd.Process.Pid) }
	leader := func() string { id, _ := redisstore.Leader(ctx, c, d.prefix); return id }
	eventually(t, 30*time.Second, "the alert process leading", func() bool { return leader() == idOf(d.alert) })

	// A second alert process on this host, the first alive: its first
	// heartbeat, written after its first try at the lease, says it
	// follows.
	other := startProc(t, "apollo alert ", "alert", "--config", filepath.Join(d.dir, "apollo.yaml"))
	var beat redisstore.Beat
	eventually(t, 30*time.Second, "the second process's heartbeat", func() bool {
		beats, _ := redisstore.Heartbeats(ctx, c, d.prefix)
		for _, b := range beats {
			if b.ID == idOf(other) {
				beat = b
				return true
			}
		}
		return false
	})
	if st, _ := beat.Stats.(map[string]any); st["leader"] != false || leader() != idOf(d.alert) {
		t.Fatalf("a second process beside a live leader: stats %v, leader %q", beat.Stats, leader())
	}
	other.kill()

	killed := time.Now()
	d.alert.kill()
	// The dead process's lease would run up to 15 s more; make it ten
	// minutes, so that only a takeover ends it within the test.
	if err := c.PExpire(ctx, d.prefix+":alert:leader", 10*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	d.alert = d.startAlert()
	eventually(t, 30*time.Second, "the restarted process leading", func() bool { return leader() == idOf(d.alert) })
	t.Logf("from the kill -9 to the restarted process leading: %v", time.Since(killed).Round(time.Millisecond))
	if !strings.Contains(d.alert.out.String(), "took over the leader lease of a dead process") {
		t.Errorf("the restarted process does not say it took the lease over:\n%s", d.alert.out.String())
	}

	// What fires now is saved, and shown by the bus, for both tenants.
	want := map[string]string{}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_after")
		want[tenant] = tenant + "_failed"
	}
	awaitTenants(t, h, "firing", want)
	for _, tenant := range tenants {
		d.firingAlert(tenant, tenant+"_failed")
	}
}

// What an alert process owed when it was killed with SIGKILL is sent by
// the process restarted on the same host at once: the outbox's lease
// proves which process holds it, as the leader lease does, and the new
// process proves it dead. Before, the outbox's lease was a bare "1": the
// restarted process waited for it to run out (15 s) before it took over
// and sent what the dead one owed. The dead process's outbox lease is
// made to run ten minutes here, so that only the proof ends it within
// the test. Each tenant's notification arrives, once.
func TestThreeProcessAlertRestartTakesTheOutboxAtOnce(t *testing.T) {
	endToEnd(t)
	h, down, refused := downHook(t)
	d := startDeployment(t, true, h, deployOptions{})
	c, _ := redistest.Client(t)
	ctx := context.Background()

	want := owedWhileDown(t, d, refused, d.alertQueued)
	d.alert.kill()
	leases, err := c.Keys(ctx, d.prefix+":notify:{outbox}:alive:*").Result()
	if err != nil || len(leases) != 1 {
		t.Fatalf("the dead process's outbox lease: %q, %v", leases, err)
	}
	if err := c.PExpire(ctx, leases[0], 10*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	restarted := time.Now()
	d.alert = d.startAlert()
	awaitOwed(t, h, want, "the restarted alert process")
	t.Logf("from the restart to both tenants' owed notifications delivered: %v", time.Since(restarted).Round(time.Millisecond))
	if !strings.Contains(d.alert.out.String(), "taking over the outbox of a dead alert process on this host") {
		t.Errorf("the restarted process does not say it took the outbox over:\n%s", d.alert.out.String())
	}
	select {
	case p := <-h.C:
		if slices.Contains(tenants, p.Alert.Tenant) {
			t.Errorf("a second notification of tenant %s, rule %s", p.Alert.Tenant, p.Alert.Rule)
		}
	default:
	}
}
