package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// Ping ends pair with their starts in the scale-out mode: on the node that
// sent the start even before the start's owner has applied it, and on any
// other node once it has; tenants with the same job names stay apart.
func TestPingsAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	a := c.start("ping-1")
	b := c.start("ping-2")
	c.waitBalanced()
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	ping := func(n *testNode, tenant, job string, st apollo.Status) string {
		t.Helper()
		now++
		ev, o, err := n.Ping(context.Background(), apollo.Ping{Tenant: tenant, Job: job, Status: st, Ts: now})
		if err != nil || o.Result != bus.Accepted {
			t.Fatalf("node %s, tenant %s, %s %s: %v %v %v", n.id, tenant, job, st, o.Result, o.Err, err)
		}
		return ev.TaskID
	}
	// At once, on the node that sent the start.
	x1 := ping(a, "x", "backup", apollo.StatusRunning)
	if got := ping(a, "x", "backup", apollo.StatusSuccess); got != x1 {
		t.Errorf("an end right after its start paired with %s, want %s", got, x1)
	}
	// On another node, once the owners have the starts; same job names in
	// two tenants.
	y1 := ping(a, "y", "backup", apollo.StatusRunning)
	nx := ping(a, "x", "nightly", apollo.StatusRunning)
	ny := ping(a, "y", "nightly", apollo.StatusRunning)
	for _, id := range []string{y1, nx, ny} {
		waitChange(t, cl, id, 1, apollo.StatusRunning)
	}
	for _, p := range []struct {
		tenant, job string
		st          apollo.Status
		want        string
	}{
		{"y", "nightly", apollo.StatusSuccess, ny}, {"y", "backup", apollo.StatusFailed, y1}, {"x", "nightly", apollo.StatusSuccess, nx},
	} {
		if got := ping(b, p.tenant, p.job, p.st); got != p.want {
			t.Errorf("tenant %s, %s on the other node: paired with %s, want %s", p.tenant, p.job, got, p.want)
		}
		waitChange(t, cl, p.want, 2, p.st)
	}
	waitChange(t, cl, x1, 2, apollo.StatusSuccess)
	// With no open run left, an end is a run of its own.
	if got := ping(b, "x", "nightly", apollo.StatusFailed); got == nx {
		t.Errorf("an end paired with a run that had ended")
	}
}

// A ping's end that comes while a partition has no owner answering (its
// node died, the lease not yet expired) is answered retry_later, and
// pairs with its start when resent after the takeover. Before, the end
// was taken as a run of its own (accepted): the start stayed running
// until its timeout, which then told of a run that had succeeded.
func TestPingEndDuringATakeoverIsResent(t *testing.T) {
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.start("pt-1")
	b := c.start("pt-2")
	c.waitBalanced()
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	starts := map[string]string{}
	for _, tenant := range []string{"x", "y"} {
		now++
		ev, o, err := a.Ping(context.Background(), apollo.Ping{Tenant: tenant, Job: "backup", Status: apollo.StatusRunning, Ts: now})
		if err != nil || o.Result != bus.Accepted {
			t.Fatalf("tenant %s: the start: %v %v %v", tenant, o.Result, o.Err, err)
		}
		waitChange(t, cl, ev.TaskID, 1, apollo.StatusRunning)
		starts[tenant] = ev.TaskID
	}
	a.kill()
	for tenant := range starts {
		now++
		ev, o, err := b.Ping(context.Background(), apollo.Ping{Tenant: tenant, Job: "backup", Status: apollo.StatusSuccess, Ts: now})
		if err != nil || o.Result != bus.RetryLater || apollo.ErrorCode(o.Err) != apollo.EUNAVAILABLE {
			t.Fatalf("tenant %s: the end while the dead node's partition has no owner: %v %v %v (task %s)", tenant, o.Result, o.Err, err, ev.TaskID)
		}
	}
	c.waitServed(map[string]bool{a.id: true})
	for tenant, start := range starts {
		now++
		ev, o, err := b.Ping(context.Background(), apollo.Ping{Tenant: tenant, Job: "backup", Status: apollo.StatusSuccess, Ts: now})
		if err != nil || o.Result != bus.Accepted || ev.TaskID != start {
			t.Fatalf("tenant %s: the end resent after the takeover: %v %v %v, paired with %s, want %s", tenant, o.Result, o.Err, err, ev.TaskID, start)
		}
		waitChange(t, cl, start, 2, apollo.StatusSuccess)
	}
}
