package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A node that is stopping (SIGTERM) answers listings, as it answers
// questions about its partitions' tasks, until it has handed its
// partitions over: a listing through either node while it is about to
// hand them over holds every task of each of two tenants. Before, it
// stopped answering listings as soon as Stop began, and a listing
// through any node waited for its partitions and answered 503
// ("partitions … did not answer within 2s") while a task read of the
// same partitions was answered.
func TestListingWhileANodeStops(t *testing.T) {
	c := newTestCluster(t, 4, DefaultLeaseTTL)
	// Each tenant has a task in each partition: ids[tenant][p].
	ids := map[string]map[int]string{}
	want := map[string][]string{}
	var evs []apollo.Event
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"acme", "beta"} {
		ids[tenant] = map[int]string{}
		for i := 0; len(ids[tenant]) < c.parts; i++ {
			id := fmt.Sprintf("%s-%d", tenant, i)
			if p := Partition(id, c.parts); ids[tenant][p] == "" {
				ids[tenant][p] = id
				want[tenant] = append(want[tenant], id)
				evs = append(evs, apollo.Event{TaskID: id, Name: "job", Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant})
			}
		}
		slices.Sort(want[tenant])
	}
	type listing struct {
		through, tenant string
		ids             []string
		err             error
	}
	var heard []listing
	var readErr error
	var a, b *testNode
	a = c.startWith("stop-1", func(o *Options) {
		o.testStoppingHook = func() { // before the first partition is handed over
			for _, n := range []*testNode{b, a} {
				for _, tenant := range []string{"acme", "beta"} {
					page, _, err := n.List(apollo.TaskFilter{Tenant: tenant})
					l := listing{through: n.id, tenant: tenant, err: err}
					for _, tk := range page {
						l.ids = append(l.ids, tk.TaskID)
					}
					heard = append(heard, l)
				}
			}
			for p := range c.parts {
				if owner, _ := c.ownerOf(p); owner == a {
					_, readErr = b.Get("beta", ids["beta"][p])
					break
				}
			}
		}
	})
	b = c.start("stop-2")
	c.waitBalanced()
	cl := recordChanges(t, connect(t, c.srv))
	publishAll(t, a, evs)
	for _, ev := range evs {
		waitChange(t, cl, ev.TaskID, 1, apollo.StatusRunning)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 4 {
		t.Fatalf("the node stopped without the hook before its handover (%d listings)", len(heard))
	}
	for _, l := range heard {
		slices.Sort(l.ids)
		if l.err != nil || !slices.Equal(l.ids, want[l.tenant]) {
			t.Errorf("%s's tasks through %s while stop-1 stops: %v, %v; want %v", l.tenant, l.through, l.ids, l.err, want[l.tenant])
		}
	}
	if readErr != nil {
		t.Errorf("a task of stop-1's through stop-2 while stop-1 stops: %v", readErr)
	}
}
