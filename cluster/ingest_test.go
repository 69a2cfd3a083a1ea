package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// The node an agent posted to dies while its batches are on their way to
// JetStream (some stored and acknowledged, some stored and not, some not
// sent), and it also owned partitions. Every event it answered accepted,
// in both tenants, is applied by the node that takes over; what it
// answered retry_later may or may not be, and nothing is applied twice.
func TestNodeKilledMidBatchLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("a takeover on the real clock; run without -short")
	}
	const parts = 4
	c := newTestCluster(t, parts, 3*time.Second)
	victim := c.start("batch-1")
	c.waitServed(nil)
	survivor := c.start("batch-2")
	changes := recordChanges(t, connect(t, c.srv))

	type sent struct {
		ev     apollo.Event
		result bus.Result
	}
	var mu sync.Mutex
	var all []sent
	var wg sync.WaitGroup
	killed := make(chan struct{})
	var once sync.Once
	base := time.Now().Add(-time.Minute).UnixMilli()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-killed:
					return
				default:
				}
				// 40 runs of three events, in both tenants: several
				// events per partition per request, so every message
				// is a batch.
				var evs []apollo.Event
				for r := range 40 {
					tenant := []string{"", "acme"}[r%2]
					id := fmt.Sprintf("k-%d-%d-%d", w, i, r)
					for seq := int64(1); seq <= 3; seq++ {
						st := []apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess}[seq-1]
						evs = append(evs, apollo.Event{Tenant: tenant, TaskID: id, Name: "batch", Sequence: seq, Status: st, Ts: base + seq})
					}
				}
				out := make([]bus.Outcome, len(evs))
				if err := victim.Publish(context.Background(), evs, out); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for k := range evs {
					all = append(all, sent{evs[k], out[k].Result})
				}
				n := len(all)
				mu.Unlock()
				if w == 0 && n >= 4*360 {
					// Killed from another goroutine while the others
					// are between publishing and their acks.
					once.Do(func() {
						victim.kill()
						close(killed)
					})
				}
			}
		}()
	}
	wg.Wait()
	owners := c.waitServed(map[string]bool{victim.id: true})
	t.Logf("partitions served again by %v", owners)

	// A sentinel per partition through the survivor: the owner reads a
	// partition in stream order, so once it is applied every event stored
	// before it has been decided.
	for p := range parts {
		id := sentinelOf(p, parts)
		publishAll(t, survivor, []apollo.Event{{TaskID: id, Sequence: 1, Status: apollo.StatusPending, Ts: base}})
		waitChange(t, changes, id, 1, apollo.StatusPending)
	}

	counts := map[bus.Result]int{}
	for _, s := range all {
		counts[s.result]++
	}
	t.Logf("answers: %v", counts)
	if counts[bus.RetryLater] == 0 {
		t.Log("no request was cut mid-batch this time (every answer came before the kill)")
	}
	if counts[bus.Accepted] == 0 {
		t.Fatal("nothing was accepted before the kill")
	}
	for _, s := range all {
		if s.result != bus.Accepted {
			continue
		}
		task, err := survivor.Get(s.ev.Tenant, s.ev.TaskID)
		if err != nil {
			t.Fatalf("tenant %q task %s (accepted event %d): %v", s.ev.Tenant, s.ev.TaskID, s.ev.Sequence, err)
		}
		if task.Sequence < s.ev.Sequence {
			t.Fatalf("tenant %q task %s: event %d was accepted, the task is at %d", s.ev.Tenant, s.ev.TaskID, s.ev.Sequence, task.Sequence)
		}
		for k, h := range task.History {
			if h.Sequence != int64(k+1) {
				t.Fatalf("tenant %q task %s: history %+v is not 1, 2, 3 in order, once each", s.ev.Tenant, s.ev.TaskID, task.History)
			}
		}
	}
	// The other tenant does not see it.
	if task, err := survivor.Get("other", all[0].ev.TaskID); err == nil {
		t.Errorf("tenant other sees %s: %+v", all[0].ev.TaskID, task)
	}
}

// sentinelOf is a task ID in partition p.
func sentinelOf(p, parts int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("sentinel-%d", i); Partition(id, parts) == p {
			return id
		}
	}
}
