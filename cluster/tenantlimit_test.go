package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A tenant over its task limit on a partition does not stop the
// partition for the other tenants: their events, stored after the
// refused one, are applied, and the refused events are counted. Before,
// the owner offered the refused event again, once a second, until the
// tenant's tasks left memory (up to retention.idle), and decided nothing
// else of the partition meanwhile: every tenant's events on it waited,
// although each had been answered accepted.
func TestATenantOverItsLimitDoesNotStopTheOthers(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	c.bus.TenantTasks = map[string]int{"acme": 2}
	n := c.start("limit-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	var evs []apollo.Event
	for i := range 3 {
		evs = append(evs, apollo.Event{TaskID: fmt.Sprintf("acme-%d", i), Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: "acme"})
	}
	publishAll(t, n, evs)
	publishAll(t, n, []apollo.Event{{TaskID: "globex-1", Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: "globex"}})
	publishAll(t, n, []apollo.Event{{TaskID: "acme-0", Sequence: 2, Status: apollo.StatusSuccess, Ts: now + 1, Tenant: "acme"}})
	waitChange(t, cl, "globex-1", 1, apollo.StatusRunning)
	waitChange(t, cl, "acme-0", 2, apollo.StatusSuccess)
	if _, err := n.Get("acme", "acme-2"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Errorf("acme's third task: %v, want it refused (not found)", err)
	}
	if s := n.Stats(); s.Refused != 1 {
		t.Errorf("the node counts %d refused events, want acme's third task's", s.Refused)
	}
}
