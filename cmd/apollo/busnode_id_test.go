package main

import (
	"strings"
	"testing"

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
	eventually(t, testwait.Timeout(t), "the restarted node serving both partitions", func() bool { return len(servedBy(t, again.addr)) == 2 })
	again.kill() // its log is read once it is written
	if !strings.Contains(again.out.String(), "waiting for it to expire") {
		t.Errorf("the restarted node did not wait for its old registration:\n%s", again.out)
	}
}
