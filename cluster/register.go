package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
)

// A node registers under node.<id>, and its leases hold that ID: two
// processes with one ID would count as one live node, split the
// partitions wrongly and each take the other's leases for its own
// (renewOne). So each process has an instance ID of its own, written in
// its registration, and a node starts only when no other process's
// registration of its ID is live.

// registration is the value of a node.<id> key.
type registration struct {
	Node     string `json:"node"`
	Instance string `json:"instance,omitempty"` // empty: written by a version before instances
	At       int64  `json:"at"`                 // Unix ms, by the writer's clock
}

func newInstanceID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (n *Node) registration() []byte {
	v, _ := json.Marshal(registration{Node: n.opts.NodeID, Instance: n.instance, At: n.opts.Clock.Now().UnixMilli()})
	return v
}

// heartbeat renews the node's registration: the live nodes are the
// node.* keys, each expiring a lease TTL after its last write. It writes
// over its own last write only: a registration of another process of
// this ID, written while this one was paused or cut off for longer than
// a TTL (a replacement started under the same --node-id), is
// errAnotherInstance, and this process gives way (Node.giveWay).
func (n *Node) heartbeat(ctx context.Context) error {
	key := nodeKey(n.opts.NodeID)
	rev, err := n.kv.Update(ctx, key, n.registration(), n.regRev)
	if err == nil {
		n.regRev = rev
		return nil
	}
	e, gerr := n.kv.Get(ctx, key)
	switch {
	case gerr == nil:
		var r registration
		json.Unmarshal(e.Value(), &r)
		if r.Instance != n.instance {
			return errAnotherInstance
		}
		// Ours: a renewal whose answer was lost did write it.
		rev, err = n.kv.Update(ctx, key, n.registration(), e.Revision())
	case errors.Is(gerr, jetstream.ErrKeyNotFound), errors.Is(gerr, jetstream.ErrKeyDeleted):
		// Expired while this process was away, and nobody took it.
		rev, err = n.kv.Create(ctx, key, n.registration())
	default:
		err = gerr
	}
	if err != nil {
		return fmt.Errorf("cluster: registering the node: %w", err)
	}
	n.regRev = rev
	return nil
}

// errAnotherInstance is what heartbeat finds when another process has
// registered this node's ID.
var errAnotherInstance = errors.New("cluster: another process registered this node ID")

// register writes the node's first registration, with Create so that of
// two processes of one ID starting at once only one gets it. A
// registration of another process found live is waited out: a node
// restarted right after kill -9 finds its own old one, which expires a
// lease TTL after its last renewal (as its old leases do). One renewed
// meanwhile is another live process of this ID: the node refuses to start.
func (n *Node) register(ctx context.Context) error {
	key := nodeKey(n.opts.NodeID)
	for {
		rev, err := n.kv.Create(ctx, key, n.registration())
		if err == nil {
			n.regRev = rev
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("cluster: registering the node: %w", err)
		}
		e, err := n.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			continue // gone meanwhile
		case err != nil:
			return fmt.Errorf("cluster: reading the registration of node %s: %w", n.opts.NodeID, err)
		}
		if err := n.awaitExpiry(ctx, e); err != nil {
			return err
		}
	}
}

// awaitExpiry waits until the registration e is gone, and refuses if it
// is written again before.
func (n *Node) awaitExpiry(ctx context.Context, e jetstream.KeyValueEntry) error {
	var other registration
	json.Unmarshal(e.Value(), &other)
	n.log.Warn("another process's registration of this node ID is live: waiting for it to expire "+
		"(after kill -9 it is this node's own, gone a lease TTL after its last renewal)",
		"instance", n.instance, "other_instance", other.Instance, "ttl", n.opts.LeaseTTL)
	t := n.opts.Clock.NewTicker(n.opts.RenewEvery / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C():
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the registration of node %s to expire: %w", n.opts.NodeID, ctx.Err())
		}
		now, err := n.kv.Get(ctx, e.Key())
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			n.log.Info("the other registration expired; registering", "instance", n.instance)
			return nil
		case err != nil:
			n.warn("reading the node's registration failed; retrying", "err", err)
		case now.Revision() != e.Revision():
			return duplicateNodeError(n.opts.NodeID)
		}
	}
}

func duplicateNodeError(id string) error {
	return &apollo.Error{Code: apollo.ECONFLICT, Field: "cluster.NodeID",
		Message: fmt.Sprintf("another live process runs as node %q: its registration in the %s bucket was renewed while this one waited", id, LeaseBucket),
		Hint:    "give each node its own --node-id, kept across restarts; the default is the host name, so two nodes on one host need one each"}
}
