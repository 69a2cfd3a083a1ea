package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// whileANodeStops starts two nodes of four partitions, reports a running
// task of each of two tenants in each partition (ids[tenant][p]), and
// stops the first node; during runs in its Stop before it hands its first
// partition over, with the stopping node a and the other b. It returns
// once b serves every partition.
func whileANodeStops(t *testing.T, during func(a, b *testNode, ids map[string]map[int]string)) (b *testNode, ids map[string]map[int]string) {
	t.Helper()
	c := newTestCluster(t, 4, DefaultLeaseTTL)
	ids = map[string]map[int]string{}
	var evs []apollo.Event
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"acme", "beta"} {
		ids[tenant] = map[int]string{}
		for i := 0; len(ids[tenant]) < c.parts; i++ {
			id := fmt.Sprintf("%s-%d", tenant, i)
			if p := Partition(id, c.parts); ids[tenant][p] == "" {
				ids[tenant][p] = id
				evs = append(evs, apollo.Event{TaskID: id, Name: "job", Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant})
			}
		}
	}
	var a *testNode
	ran := false
	a = c.startWith("stop-1", func(o *Options) {
		o.testStoppingHook = func() {
			during(a, b, ids)
			ran = true
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
	if !ran {
		t.Fatal("the node stopped without the hook before its handover")
	}
	c.waitServed(map[string]bool{a.id: true})
	return b, ids
}

// ownedBy returns a partition that n serves.
func ownedBy(t *testing.T, n *testNode) int {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for p := range n.owned {
		return p
	}
	t.Fatalf("node %s serves no partition", n.id)
	return 0
}

// A node that is stopping (SIGTERM) answers listings, as it answers
// questions about its partitions' tasks, until it has handed its
// partitions over: a listing through either node while it is about to
// hand them over holds every task of each of two tenants. Before, it
// stopped answering listings as soon as Stop began, and a listing
// through any node waited for its partitions and answered 503
// ("partitions … did not answer within 2s") while a task read of the
// same partitions was answered.
func TestListingWhileANodeStops(t *testing.T) {
	type listing struct {
		through, tenant string
		ids             []string
		err             error
	}
	var heard []listing
	var readErr error
	_, ids := whileANodeStops(t, func(a, b *testNode, ids map[string]map[int]string) {
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
		_, readErr = b.Get("beta", ids["beta"][ownedBy(t, a)])
	})
	for _, l := range heard {
		var want []string
		for _, id := range ids[l.tenant] {
			want = append(want, id)
		}
		slices.Sort(want)
		slices.Sort(l.ids)
		if l.err != nil || !slices.Equal(l.ids, want) {
			t.Errorf("%s's tasks through %s while stop-1 stops: %v, %v; want %v", l.tenant, l.through, l.ids, l.err, want)
		}
	}
	if len(heard) != 4 {
		t.Errorf("%d listings; want 4", len(heard))
	}
	if readErr != nil {
		t.Errorf("a task of stop-1's through stop-2 while stop-1 stops: %v", readErr)
	}
}

// A correction asked through another node of a task whose owner is
// stopping, before it hands the partition over, is made, answered as
// made, and stays made on the next owner; two tenants' tasks. Before,
// the owner made it with a context Stop had already cancelled: it
// applied and logged the correction, then failed waiting for the log,
// and the asker answered an internal error for a correction that was
// made.
func TestCorrectionWhileItsOwnerStops(t *testing.T) {
	var errs []error
	var fixed []*apollo.Task
	b, _ := whileANodeStops(t, func(a, b *testNode, ids map[string]map[int]string) {
		p := ownedBy(t, a)
		for _, tenant := range []string{"acme", "beta"} {
			task, err := b.Correct(context.Background(), tenant, ids[tenant][p], apollo.StatusFailed, "ops", "stuck while its node stops")
			fixed, errs = append(fixed, task), append(errs, err)
		}
	})
	for i, tenant := range []string{"acme", "beta"} {
		if errs[i] != nil || fixed[i] == nil || fixed[i].Status != apollo.StatusFailed || fixed[i].Tenant != tenant {
			t.Errorf("%s's correction while its owner stops: %+v, %v; want it failed", tenant, fixed[i], errs[i])
			continue
		}
		task, err := b.Get(tenant, fixed[i].TaskID)
		if err != nil || task.Status != apollo.StatusFailed {
			t.Errorf("%s's task on its next owner: %+v, %v; want the correction kept", tenant, task, err)
		}
	}
}
