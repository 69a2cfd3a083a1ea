package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// A correction asked of another node waits for the owner to log it, which
// may take up to PublishTimeout (a slow JetStream disk). The asker gave up
// after QueryTimeout and answered 503 while the owner went on and applied
// the correction: the operator, told it failed, corrected again (or gave
// up on a correction that was in fact made). The asker now waits as long
// as the owner may. Here the owner's decision log takes 10× the query
// timeout, well within its publish timeout; two tenants.
func TestCorrectionOnASlowOwnerIsAnswered(t *testing.T) {
	const query = 50 * time.Millisecond
	var slow atomic.Bool
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.startWith("cs-1", func(o *Options) {
		o.testLogHook = func() {
			if slow.Load() {
				time.Sleep(10 * query) // a slow disk under the log, not a wait
			}
		}
	})
	b := c.startWith("cs-2", func(o *Options) { o.QueryTimeout = query })
	c.waitBalanced()
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("stuck-%d", i); a.local(Partition(cand, c.parts)) != nil {
			id = cand
		}
	}
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"x", "y"} {
		out := make([]bus.Outcome, 1)
		ev := apollo.Event{Tenant: tenant, TaskID: id, Name: "nightly", Sequence: 1, Status: apollo.StatusRunning, Ts: now}
		if err := b.Publish(context.Background(), []apollo.Event{ev}, out); err != nil || out[0].Result != bus.Accepted {
			t.Fatalf("tenant %s: %v %+v", tenant, err, out[0])
		}
	}
	waitChanges(t, cl, id, 1, 2)
	slow.Store(true)
	for _, tenant := range []string{"x", "y"} {
		task, err := b.Correct(context.Background(), tenant, id, apollo.StatusFailed, "ops", "the host died")
		if err != nil || task == nil || task.Status != apollo.StatusFailed {
			t.Fatalf("tenant %s: the correction through the other node: %+v, %v", tenant, task, err)
		}
	}
	slow.Store(false)
	for _, tenant := range []string{"x", "y"} {
		task, err := b.Get(tenant, id)
		if err != nil || task.Status != apollo.StatusFailed {
			t.Fatalf("tenant %s: after the correction: %+v %v", tenant, task, err)
		}
	}
}
