package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/internal/testwait"
)

// busNodeArgs are the arguments of a node of a two-partition cluster on
// the NATS server at url.
func busNodeArgs(url, id string) []string {
	return []string{"bus", "--nats", url, "--partitions", "2", "--node-id", id, "--listen", "127.0.0.1:0"}
}

// A second node started with the ID of a live one is refused, with what
// to do, and the first goes on serving. Before, it started without a
// word: both counted as one live node, and each took the other's leases
// for its own.
func TestBusNodeRefusesATwinID(t *testing.T) {
	t.Parallel()
	url := startNATS(t).ClientURL()
	first := startApollo(t, busNodeArgs(url, "twin")...)
	eventually(t, testwait.Timeout(t), "the first node serving both partitions", func() bool { return len(servedBy(t, first.addr)) == 2 })
	code, stderr := runBinary(t, busNodeArgs(url, "twin")...)
	if code != 1 || !strings.Contains(stderr, `another live process runs as node "twin"`) ||
		!strings.Contains(stderr, "give each node its own --node-id") {
		t.Fatalf("a second node with the first's ID: exit %d:\n%s", code, stderr)
	}
	if n := len(servedBy(t, first.addr)); n != 2 {
		t.Errorf("the first node serves %d partitions after its twin was refused, want 2\n%s", n, first.out)
	}
}

// A node killed with SIGKILL and started again with its ID finds its own
// registration still live; it waits for it to expire and starts, and
// serves every partition again.
func TestBusNodeRestartsAfterKill9(t *testing.T) {
	t.Parallel()
	url := startNATS(t).ClientURL()
	first := startApollo(t, busNodeArgs(url, "phoenix")...)
	eventually(t, testwait.Timeout(t), "the node serving both partitions", func() bool { return len(servedBy(t, first.addr)) == 2 })
	first.kill()
	again := startApollo(t, busNodeArgs(url, "phoenix")...)
	if n := servedWhenReady(t, again.addr); n != 2 {
		t.Errorf("the restarted node said ready serving %d partitions, want 2", n)
	}
	again.kill() // its log is read once it is written
	if !strings.Contains(again.out.String(), "waiting for it to expire") {
		t.Errorf("the restarted node did not wait for its old registration:\n%s", again.out)
	}
}

// A node is not ready while a lease of its ID that it does not hold is
// live: what a node restarted after kill -9 finds of its previous process
// (a NATS server before 2.11 sends no expiry markers, so the node counts
// such a lease live for a TTL after it first sees it). Before, /readyz
// answered ready as soon as the node had rebuilt the one free partition,
// and for up to 10 s the other was served by nobody.
func TestBusNodeNotReadyWithoutItsShare(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	js := jetStreamOf(t, ns.ClientURL())
	ctx := testwait.Context(t)
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cluster.LeaseBucket, TTL: cluster.DefaultLeaseTTL,
		History: 1, Storage: jetstream.FileStorage, LimitMarkerTTL: cluster.DefaultLeaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "p.0", []byte("reborn")); err != nil { // as the process before left it
		t.Fatal(err)
	}
	p := startApollo(t, busNodeArgs(ns.ClientURL(), "reborn")...)
	if n := servedWhenReady(t, p.addr); n != 2 {
		t.Errorf("the node said ready serving %d of 2 partitions (the other under its old lease)", n)
	}
}

// jetStreamOf connects to the NATS server at url for the rest of the test.
func jetStreamOf(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// servedWhenReady waits for a node's GET /readyz to answer 200 and
// returns how many partitions the node serves then.
func servedWhenReady(t *testing.T, addr string) int {
	t.Helper()
	eventually(t, testwait.Timeout(t), "GET /readyz 200", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return len(servedBy(t, addr))
}

// A node whose ID another process registered while it could not renew
// it (paused or cut off for longer than a lease TTL, and a replacement
// started under the same --node-id) gives its partitions up and exits 1,
// saying why, and leaves the other's registration. Before, it wrote over
// the other's registration and took back every lease of their common ID,
// and both served the partitions by turns.
func TestBusNodeExitsWhenAnotherProcessTakesItsID(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	p := startApollo(t, busNodeArgs(ns.ClientURL(), "paused")...)
	eventually(t, testwait.Timeout(t), "the node serving both partitions", func() bool { return len(servedBy(t, p.addr)) == 2 })
	js := jetStreamOf(t, ns.ClientURL())
	ctx := testwait.Context(t)
	kv, err := js.KeyValue(ctx, cluster.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	other := `{"node":"paused","instance":"the-replacement","at":1}`
	if _, err := kv.Put(ctx, "node.paused", []byte(other)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		t.Fatalf("the node still runs after another process registered its ID\n%s", p.out)
	}
	if p.waitErr == nil || !strings.Contains(p.out.String(), `another process runs as node "paused"`) {
		t.Errorf("exit %v:\n%s", p.waitErr, p.out)
	}
	if e, err := kv.Get(ctx, "node.paused"); err != nil || string(e.Value()) != other {
		t.Errorf("the other process's registration after the node exited: %v", err)
	}
}
