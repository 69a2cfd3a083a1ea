package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
)

// Nodes with different partition counts would route a task's events to
// different partitions: the cluster's state would split. A node started
// with another count than the cluster's is refused, whether or not the
// NATS server keeps stream metadata (servers before 2.10 drop it; the
// metadata is taken off here to be such a server), and of two first nodes
// started at once with different counts, one is refused.
func TestNodesAgreeOnThePartitionCount(t *testing.T) {
	t.Parallel()
	// startNode may run on a goroutine of its own: nc is connected before.
	startNode := func(t *testing.T, c *testCluster, nc *nats.Conn, id string, parts int) error {
		n, err := New(Options{Conn: nc, NodeID: id, Partitions: parts, LeaseTTL: c.ttl, Logger: quiet})
		if err != nil {
			return err
		}
		err = n.Start(context.Background())
		if err == nil {
			t.Cleanup(func() { n.Stop(context.Background()) })
		}
		return err
	}
	refused := func(err error, want, got string) bool {
		return apollo.ErrorCode(err) == apollo.EINVALID && strings.Contains(err.Error(), "this node has "+want+" partitions, the cluster "+got)
	}

	t.Run("one after the other, without stream metadata", func(t *testing.T) {
		t.Parallel()
		c := newTestCluster(t, 4, 3*time.Second)
		if err := startNode(t, c, connect(t, c.srv), "a", 4); err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(connect(t, c.srv))
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(context.Background(), EventsStream)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Metadata = nil
		if _, err := js.UpdateStream(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if err := startNode(t, c, connect(t, c.srv), "b", 8); !refused(err, "8", "4") {
			t.Fatalf("a node with 8 partitions in a cluster of 4: %v", err)
		}
		if err := startNode(t, c, connect(t, c.srv), "c", 4); err != nil {
			t.Fatalf("a node with the cluster's count: %v", err)
		}
	})

	t.Run("two first nodes at once", func(t *testing.T) {
		t.Parallel()
		c := newTestCluster(t, 4, 3*time.Second)
		errs := make(chan error, 2)
		for i, parts := range []int{4, 8} {
			nc := connect(t, c.srv)
			go func() { errs <- startNode(t, c, nc, string(rune('a'+i)), parts) }()
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("both started or both refused: %v; %v", e1, e2)
		}
		for _, err := range []error{e1, e2} {
			if err != nil && !refused(err, "8", "4") && !refused(err, "4", "8") {
				t.Fatalf("refused with %v", err)
			}
		}
	})
}
