package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/internal/natstest"
	"github.com/apollo-11/apollo/internal/testwait"
)

// --nats-replicas reaches JetStream: on a NATS cluster of three, every
// stream and bucket a node uses keeps three copies, and with one server
// of the three gone the node still takes events and reads them back,
// for two tenants. A value JetStream cannot have is refused at once.
// Before, there was no way to ask for more than one copy: the streams of
// a NATS cluster of three lived on one of its servers, and losing that
// one stopped every node and lost what they had accepted.
func TestBusNodeNATSReplicasReachJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("a NATS cluster of three: skipped with -short")
	}
	t.Parallel()
	if code, stderr := runBinary(t, append(busNodeArgs("nats://127.0.0.1:1", "r2"), "--nats-replicas", "2")...); code != 2 ||
		!strings.Contains(stderr, "--nats-replicas 2: use 1, or 3") {
		t.Fatalf("--nats-replicas 2: exit %d:\n%s", code, stderr)
	}
	natsc := natstest.NewCluster(t, 3)
	servers := natsc.Servers
	urls := natsc.URLs()
	js := jetStreamOf(t, servers[0].ClientURL())
	start, tokens := busNodesWithTenants(t, strings.Join(urls, ","), 2)
	p := start("r3-1", "--nats-replicas", "3")
	servedWhenReady(t, p.addr)
	ctx := testwait.Context(t)
	for _, name := range []string{cluster.EventsStream, cluster.LogStream, cluster.AuditStream, "KV_" + cluster.LeaseBucket,
		"KV_" + cluster.SettingsBucket, "OBJ_" + cluster.SnapshotBucket} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s keeps %d copies, want 3", name, r)
		}
	}
	event := func(seq int, status string) string {
		return fmt.Sprintf(`{"taskID":"r3-run","name":"nightly","sequence":%d,"status":%q,"ts":%d}`, seq, status, 1_764_547_200_000+seq)
	}
	for _, tenant := range tenants {
		if got := postAs(t, p.addr, tokens[tenant], event(1, "running")); !strings.Contains(got, `"accepted":1`) {
			t.Fatalf("tenant %s: %s", tenant, got)
		}
	}
	// One server of the three goes (the node may be connected to it:
	// then it reconnects to another); the streams keep a quorum.
	natsc.Stop(1)
	for _, tenant := range tenants {
		eventually(t, testwait.Timeout(t), "the success taken with a NATS server gone", func() bool {
			_, got := requestBody(t, p.addr, tokens[tenant], "POST", "/api/v1/events", event(2, "success"))
			return strings.Contains(got, `"accepted":1`)
		})
	}
	for _, tenant := range tenants {
		var task struct {
			Tenant, Status string
			History        []struct{ Sequence int }
		}
		eventually(t, testwait.Timeout(t), "the task read back with a NATS server gone", func() bool {
			code, body := request(t, p.addr, tokens[tenant], "GET", "/api/v1/tasks/r3-run")
			return code == 200 && json.Unmarshal([]byte(body), &task) == nil && task.Status == "success"
		})
		if task.Tenant != tenant || len(task.History) != 2 {
			t.Errorf("tenant %s: %+v, want its two events", tenant, task)
		}
	}
}
