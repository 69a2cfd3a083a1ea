package bus

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// Task limits apply per tenant, under a ceiling for all (issue 16.8: one
// tenant's 1 000 tasks made every other tenant's next event a 429). The
// counts come back from a snapshot, and fall as tasks leave memory.
func TestTaskLimitsPerTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) {
		o.MaxTasks = 9
		o.TenantMaxTasks = 4
		o.TenantTasks = map[string]int{"small": 2}
		o.Retention = time.Minute
	})
	create := func(tenant string, n int) (accepted int, refusal *apollo.Error) {
		t.Helper()
		for i := range n {
			e := ev(fmt.Sprintf("t%d-%d", i, f.clock.Now().Unix()), 1, apollo.StatusRunning)
			e.Tenant = tenant
			switch o := f.publish(t, e)[0]; o.Result {
			case Accepted:
				accepted++
			case RetryLater:
				refusal = o.Err
			default:
				t.Fatalf("%s: %v %v", tenant, o.Result, o.Err)
			}
		}
		return accepted, refusal
	}
	if n, err := create("greedy", 10); n != 4 || err == nil || err.Message != `not stored: tenant "greedy" has 4 tasks in memory, its limit` {
		t.Fatalf("greedy: %d accepted, %v", n, err)
	} else if !OverTenantLimit(Outcome{Result: RetryLater, Err: err}) {
		// The cluster's owners tell it from the other refusals for room
		// (cluster.partition.publish): only it is not worth trying soon.
		t.Fatalf("greedy's refusal %+v is not told as over the tenant's limit", err)
	}
	if n, err := create("acme", 3); n != 3 || err != nil {
		t.Fatalf("acme after greedy filled its share: %d accepted, %v", n, err)
	}
	if n, err := create("small", 3); n != 2 || err == nil {
		t.Fatalf("small (its own limit of 2): %d accepted, %v", n, err)
	}
	// 4 + 3 + 2 = 9, the ceiling: acme has room of its own, but not the server.
	e := ev("t9", 1, apollo.StatusRunning)
	e.Tenant = "acme"
	if o := f.publish(t, e)[0]; o.Result != RetryLater || o.Err.Message != "not stored: 9 tasks in memory, the limit" || OverTenantLimit(o) {
		t.Fatalf("over the ceiling: %v %+v (over the tenant's limit: %v)", o.Result, o.Err, OverTenantLimit(o))
	}

	// An event of a task in memory is never refused for the limit.
	e = ev(fmt.Sprintf("t0-%d", f.clock.Now().Unix()), 2, apollo.StatusSuccess)
	e.Tenant = "greedy"
	if o := f.publish(t, e)[0]; o.Result != Accepted {
		t.Fatalf("greedy's existing task: %v %v", o.Result, o.Err)
	}

	// A restart counts each tenant's tasks again from the snapshot.
	var snap bytes.Buffer
	f.bus.Checkpoint(func(uint64) error { return f.bus.WriteState(&snap) })
	b2, err := New(Options{Clock: f.clock, MaxTasks: 9, TenantMaxTasks: 4, TenantTasks: map[string]int{"small": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.ReadState(&snap); err != nil {
		t.Fatal(err)
	}
	b2.Start(t.Context())
	defer b2.Stop(context.Background())
	e = ev("t8", 1, apollo.StatusRunning)
	e.Tenant = "greedy"
	out := make([]Outcome, 1)
	b2.Publish(t.Context(), []apollo.Event{e}, out)
	if out[0].Result != RetryLater {
		t.Fatalf("greedy after a restart: %v, want its limit to hold", out[0].Result)
	}
	// Finished tasks leave memory after the retention: room again.
	f.drain()
	f.clock.Advance(2 * time.Minute)
	f.bus.Sweep()
	if n, err := create("greedy", 2); n != 1 || err == nil {
		t.Fatalf("greedy after one of its tasks left memory: %d accepted, %v", n, err)
	}
}
