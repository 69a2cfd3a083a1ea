package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// stuckKV is the lease bucket of a NATS that becomes slow for one lease:
// armed, it loses the answer to the next renewal of key, which the server
// did apply (a timeout after the write), and from then on every renewal
// of key times out unwritten, so the node never learns the revision its
// lost renewal wrote. lost is closed at the lost answer. Reads and
// deletes pass through.
type stuckKV struct {
	jetstream.KeyValue
	key  string
	lost chan struct{}

	mu    sync.Mutex
	stage int // 0 idle, 1 lose the next answer, 2 time out
}

func (s *stuckKV) arm() {
	s.mu.Lock()
	s.stage = 1
	s.mu.Unlock()
}

func (s *stuckKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	s.mu.Lock()
	stage := s.stage
	if key == s.key && stage == 1 {
		s.stage = 2
	}
	s.mu.Unlock()
	if key != s.key || stage == 0 {
		return s.KeyValue.Update(ctx, key, value, last)
	}
	if stage == 1 {
		if _, err := s.KeyValue.Update(ctx, key, value, last); err != nil {
			return 0, err
		}
		close(s.lost)
	}
	return 0, fmt.Errorf("nats: %w", context.DeadlineExceeded)
}

// idInPartition is a task ID of tenant's that falls in partition p.
func idInPartition(t *testing.T, tenant string, p, parts int) string {
	for i := 0; ; i++ {
		id := tenant + "-moved-" + strconv.Itoa(i)
		if Partition(id, parts) == p {
			return id
		}
	}
}

// A node that gives a lease up after a renewal whose answer was lost
// deletes it all the same. The lost answer left the lease at a revision
// the node does not know, so its delete over the revision it holds is
// refused; the node reads the lease, and since it still holds the node's
// own ID (only this node writes it), deletes it at the revision read. The
// next owner takes the partition at once. Before, the refused delete was
// left at a warning and the lease stood until the bucket's TTL expired
// it: with the default 10 s TTL, a partition handed over (a node joining,
// a node stopping) served by no one for up to 10 s.
func TestALeaseGivenUpAfterALostRenewalIsDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		give func(c *testCluster, n *testNode) // makes n give partition 1 up
	}{
		{"a node joins", func(c *testCluster, n *testNode) { c.start("stuck-2") }},
		{"the node stops", func(c *testCluster, n *testNode) { n.Stop(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A TTL longer than the test waits: the lease must not be
			// left to expire.
			ttl := 2 * testwait.Timeout(t)
			c := newTestCluster(t, 2, ttl)
			s := &stuckKV{key: leaseKey(1), lost: make(chan struct{})}
			n := c.startWith("stuck-1", func(o *Options) {
				o.RenewEvery = 100 * time.Millisecond
				o.testKV = func(kv jetstream.KeyValue) jetstream.KeyValue { s.KeyValue = kv; return s }
			})
			c.waitServed(nil)
			now := time.Now().UnixMilli()
			var ids []string
			for _, tenant := range []string{"", "globex"} {
				id := idInPartition(t, tenant, 1, 2)
				ids = append(ids, id)
				publishAll(t, n, []apollo.Event{{TaskID: id, Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant}})
			}
			s.arm()
			select {
			case <-s.lost:
			case <-time.After(testwait.Timeout(t)):
				t.Fatal("no renewal of partition 1's lease after arming")
			}
			tc.give(c, n)
			deadline := time.NewTimer(testwait.Timeout(t))
			defer deadline.Stop()
		released:
			for {
				select {
				case e := <-c.events:
					if e.node == "stuck-1" && e.p == 1 && (e.event == "released" || e.event == "dropped") {
						break released
					}
				case <-deadline.C:
					t.Fatal("stuck-1 never gave partition 1 up")
				}
			}
			// Gone, or already taken by the node that joined.
			e, err := s.KeyValue.Get(context.Background(), leaseKey(1))
			gone := errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
			if !gone && (err != nil || string(e.Value()) == "stuck-1") {
				t.Fatalf("after stuck-1 gave partition 1 up its lease is still in the bucket (%v, %v): the next owner waits for the TTL (%v)", e, err, ttl)
			}
			next := c.start("stuck-3")
			c.waitOwners(map[string]bool{"stuck-1": true}, "taken by another node", func(owner map[int]string) bool { return owner[1] != "" })
			for i, tenant := range []string{"", "globex"} {
				task, err := next.Get(tenant, ids[i])
				if err != nil || task.Status != apollo.StatusRunning {
					t.Errorf("%q's task after the handover: %+v, %v", tenant, task, err)
				}
			}
		})
	}
}
