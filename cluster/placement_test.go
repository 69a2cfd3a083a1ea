package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo/internal/natstest"
	"github.com/apollo-11/apollo/internal/testwait"
)

// lines is an io.Writer that hands each write (a log line) on.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// placementNode makes a node of three copies on the running servers of
// c, its log written to out.
func placementNode(t *testing.T, c *natstest.Cluster, out lines, wait time.Duration) *Node {
	t.Helper()
	nc, err := nats.Connect(strings.Join(c.URLs(), ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	n, err := New(Options{Conn: nc, NodeID: "placed", Partitions: 2, Replicas: 3, PlacementWait: wait,
		Logger: textLogger(out)})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clusterShortOfPeers is a NATS cluster of three with every server but
// JetStream's leader stopped, and that leader's index. The leader has not
// yet stepped down (it does after 10 s without a quorum): it answers "no
// suitable peers for placement, peer offline", as a cluster still
// forming did in CI (TestBusNodeNATSReplicasReachJetStream).
func clusterShortOfPeers(t *testing.T) (*natstest.Cluster, int) {
	t.Helper()
	c := natstest.NewCluster(t, 3)
	leader := c.Leader()
	c.StopAllBut(leader)
	c.WaitReady()
	return c, leader
}

// A node started while its NATS cluster of three cannot place three
// copies waits, saying so, and starts once a server is back, with three
// copies of every stream. Before, it failed at once with "no suitable peers for
// placement, peer offline", and so did `apollo bus --nats-replicas 3`
// started alongside a NATS cluster still forming.
func TestStartWaitsForTheNATSClusterToPlaceItsCopies(t *testing.T) {
	if testing.Short() {
		t.Skip("a NATS cluster of three: skipped with -short")
	}
	t.Parallel()
	c, leader := clusterShortOfPeers(t)
	out := make(lines, 64)
	n := placementNode(t, c, out, 0)
	started := make(chan error, 1)
	go func() { started <- n.Start(context.Background()) }()
	t.Cleanup(func() { n.Stop(context.Background()) })
	ctx := testwait.Context(t)
	for waiting := false; !waiting; {
		select {
		case l := <-out:
			waiting = strings.Contains(l, "waiting for JetStream to place")
		case err := <-started:
			t.Fatalf("Start with two servers of three down: %v, want it to wait", err)
		case <-ctx.Done():
			t.Fatal("no word of waiting for the copies")
		}
	}
	c.Start((leader + 1) % 3)
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start once the server is back: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Start did not return once the server was back")
	}
	nc, err := nats.Connect(c.URLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, name := range []string{EventsStream, LogStream, "KV_" + LeaseBucket, "KV_" + SettingsBucket, "OBJ_" + SnapshotBucket} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s keeps %d copies, want 3", name, r)
		}
	}
}

// A node whose copies cannot be placed within its wait says what is
// missing and what to do, and so does the audit stream's.
func TestStartGivesUpOnCopiesThatCannotBePlaced(t *testing.T) {
	if testing.Short() {
		t.Skip("a NATS cluster of three: skipped with -short")
	}
	t.Parallel()
	c, _ := clusterShortOfPeers(t)
	n := placementNode(t, c, make(lines, 64), 300*time.Millisecond)
	err := n.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start every server of the NATS cluster; 3 copies need 3 servers") {
		t.Fatalf("Start: %v, want the copies' wait given up", err)
	}
	nc, err := nats.Connect(c.URLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, err = OpenAudit(context.Background(), AuditOptions{Conn: nc, Replicas: 3, PlacementWait: 300 * time.Millisecond, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "3 copies need 3 servers") {
		t.Fatalf("OpenAudit: %v, want the copies' wait given up", err)
	}
}

func textLogger(out lines) *slog.Logger { return slog.New(slog.NewTextHandler(out, nil)) }
