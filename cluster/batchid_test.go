package cluster

import (
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// Two requests of different events never share a batch's message ID,
// whatever bytes their task IDs hold, for two tenants. The ID was the
// digest of the events' IDs each followed by a newline, which a task ID
// may hold: the events a, b and c of one request, and the events
// "a:1\n<tenant>/b" and c of the next, digested the same bytes, and the
// second request was answered duplicate and never stored.
func TestBatchIDsDoNotCollideOnNewlines(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	a := c.start("nl-1")
	c.waitServed(nil)
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"acme", "globex"} {
		run := func(id string) apollo.Event {
			return apollo.Event{TaskID: id, Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant}
		}
		publishAll(t, a, []apollo.Event{run("a"), run("b"), run("c")})
		publishAll(t, a, []apollo.Event{run("a:1\n" + TenantToken(tenant) + "/b"), run("c")}) // c: a late duplicate, accepted
	}
}
