package cluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo/internal/testwait"
)

// A node that finds its registration written by another process of its
// ID while it runs — it was paused or cut off for longer than a lease TTL,
// and the operator started a replacement under the same --node-id — gives
// its partitions up at once, without touching the other's leases or
// registration, and says so (Evicted). Before, it overwrote the other's
// registration, and its renewals took back every lease holding their
// common ID: both served the partitions, each fenced by the other's
// writes in turn.
func TestANodeGivesWayToAnotherProcessOfItsID(t *testing.T) {
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.start("twin")
	c.waitServed(nil)
	js, err := jetstream.New(connect(t, c.srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testwait.Context(t)
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(registration{Node: "twin", Instance: "the-replacement", At: time.Now().UnixMilli()})
	if _, err := kv.Put(ctx, nodeKey("twin"), other); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Evicted():
	case <-ctx.Done():
		t.Fatal("the node did not see the other process's registration")
	}
	if s := a.NodeStats(); len(s.Leases) != 0 || len(s.Partitions) != 0 {
		t.Errorf("the node still holds %v and serves %d partitions", s.Leases, len(s.Partitions))
	}
	a.Stop(context.Background())
	e, err := kv.Get(ctx, nodeKey("twin"))
	if err != nil || string(e.Value()) != string(other) {
		t.Errorf("the other process's registration after the node stopped: %v", err)
	}
}
