package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// unsureKV is the lease bucket of a NATS that is slow to answer: armed, it
// loses the answer to one renewal of key that the server did apply (as a
// timeout after the write would), then, with failCheck, fails the read the
// node makes to check whether the lease is still its own; done is closed
// at the second renewal of key that succeeds after (the first is made
// over the revision read, the second over the revision it wrote).
type unsureKV struct {
	jetstream.KeyValue
	key       string
	failCheck bool
	done      chan struct{}

	mu    sync.Mutex
	stage int // 0 idle, 1 lose the next answer, 2 fail the next read, 3 and 4 wait for renewals, 5 done
}

func (u *unsureKV) arm() {
	u.mu.Lock()
	u.stage = 1
	u.mu.Unlock()
}

func (u *unsureKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := u.KeyValue.Update(ctx, key, value, last)
	if key != u.key || err != nil {
		return rev, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch u.stage {
	case 1:
		u.stage = 3
		if u.failCheck {
			u.stage = 2
		}
		return 0, fmt.Errorf("nats: %w", context.DeadlineExceeded) // written, the answer lost
	case 3:
		u.stage = 4
	case 4:
		u.stage = 5
		close(u.done)
	}
	return rev, err
}

func (u *unsureKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	u.mu.Lock()
	fail := key == u.key && u.stage == 2
	if fail {
		u.stage = 3
	}
	u.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("nats: %w", context.DeadlineExceeded)
	}
	return u.KeyValue.Get(ctx, key)
}

// A renewal whose answer was lost (the server applied it, then a timeout)
// leaves the lease at a revision the node does not know: its next renewal
// is refused (ErrKeyExists) and the node reads the lease to see whether it
// still holds it. When that read fails too (NATS slow), whether the lease
// is ours is unknown, and the node must retry until its local deadline:
// the partition keeps serving, with no handover. Before, the refusal was
// taken as "another node holds it", and the node stopped the partition and
// retook it for nothing.
func TestALeaseWhoseRenewalCannotBeCheckedIsKept(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failCheck bool
	}{
		{"the answer to a renewal lost", false},
		{"the answer lost, then the check fails", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 1, 3*time.Second)
			u := &unsureKV{key: leaseKey(0), failCheck: tc.failCheck, done: make(chan struct{})}
			n := c.startWith("unsure-1", func(o *Options) {
				o.RenewEvery = 300 * time.Millisecond // the local deadline is eight renewals away
				o.testKV = func(kv jetstream.KeyValue) jetstream.KeyValue { u.KeyValue = kv; return u }
			})
			c.waitServed(nil)
			now := time.Now().UnixMilli()
			for _, tenant := range []string{"", "globex"} {
				publishAll(t, n, []apollo.Event{{TaskID: tenant + "-kept", Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant}})
			}
			u.arm()
			select {
			case <-u.done:
			case <-time.After(testwait.Timeout(t)):
				t.Fatal("the lease was not renewed twice after the lost answer")
			}
		drain:
			for {
				select {
				case e := <-c.events:
					if e.event != "taken" {
						t.Errorf("partition %d was %s by %s: the lease is still the node's", e.p, e.event, e.node)
					}
				default:
					break drain
				}
			}
			n.mu.Lock()
			held := n.leases[0] != nil
			n.mu.Unlock()
			e, err := u.KeyValue.Get(context.Background(), leaseKey(0))
			if err != nil || !held || string(e.Value()) != n.id {
				t.Fatalf("after the renewals the node holds the lease: %v; the bucket %v, %v", held, e, err)
			}
			for _, tenant := range []string{"", "globex"} {
				task, err := n.Get(tenant, tenant+"-kept")
				if err != nil || task.Status != apollo.StatusRunning {
					t.Errorf("%q's task: %+v, %v", tenant, task, err)
				}
			}
		})
	}
}
