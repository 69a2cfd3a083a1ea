package stream

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// When the bus cuts the hub off, every client resynchronises from a
// snapshot: each gets its own tenant's tasks under its own filter, never
// another tenant's or another job's, and its system message is its own
// tenant's. Tenant a watches the etl job; tenant b everything, with
// the system figures, and both tenants have an etl job.
func TestResyncKeepsEachClientToItsTenantAndFilter(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var blocked sync.Mutex
	blocked.Lock() // held while the test wants the dispatcher stuck
	e := newStreamEnv(t, func(o *Options) {
		o.BusBuffer = 2
		o.System = func(tenant string) any { return map[string]any{"of": tenant} }
		o.testGate = func() {
			select {
			case <-gate:
				blocked.Lock()
				blocked.Unlock()
			default:
			}
		}
	})
	a, b := e.dial("view-a"), e.dial("view-b")
	a.subscribe(sub{"type": "subscribe", "coalesce": false, "filter": map[string]any{"prefix": "etl", "types": []string{"tasks", "alert"}}})
	b.subscribe(sub{"type": "subscribe", "coalesce": false})
	if m := b.read(); m.Type != apiclient.MsgSystem || string(m.Stats) != `{"of":"b"}` {
		t.Fatalf("b's figures on subscribing: %s %s", m.Type, m.Stats)
	}
	close(gate) // the dispatcher stops before its next batch
	for i := range 6 {
		e.publish(ev("a", fmt.Sprintf("etl-a%d", i), "etl", 1, pending), ev("a", fmt.Sprintf("web-a%d", i), "web", 1, pending),
			ev("b", fmt.Sprintf("etl-b%d", i), "etl", 1, pending), ev("b", fmt.Sprintf("web-b%d", i), "web", 1, pending))
	}
	if err := e.bus.WaitDrained(testwait.Context(t)); err != nil {
		t.Fatalf("bus still has %d changes queued: %v", e.bus.Stats().Queued, err)
	}
	blocked.Unlock()
	for _, c := range []struct {
		c      *wsClient
		tenant string
		prefix string
		want   int
	}{{a, "a", "etl", 6}, {b, "b", "", 12}} {
		got := map[string]apollo.Task{}
		for {
			m := c.c.read()
			for _, task := range m.Tasks {
				if task.Tenant != c.tenant || !strings.HasPrefix(task.Name, c.prefix) {
					t.Errorf("tenant %s (prefix %q) was sent %s of tenant %s in a %s message", c.tenant, c.prefix, task.TaskID, task.Tenant, m.Type)
				}
			}
			if m.Type == apiclient.MsgSystem && string(m.Stats) != `{"of":"`+c.tenant+`"}` {
				t.Errorf("tenant %s was sent the system figures %s", c.tenant, m.Stats)
			}
			if m.Type == apiclient.MsgSnapshot {
				if m.Reason != "resync" {
					t.Fatalf("tenant %s: snapshot reason %q", c.tenant, m.Reason)
				}
				latest(got, m.Tasks)
				break
			}
			latest(got, m.Tasks)
		}
		if len(got) != c.want {
			t.Errorf("tenant %s after the resync holds %d tasks, want %d", c.tenant, len(got), c.want)
		}
	}
	if s := e.hub.Stats(); s.Resyncs != 1 {
		t.Errorf("resyncs %d, want 1", s.Resyncs)
	}
}
