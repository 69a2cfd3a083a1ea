package cluster

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// newerBatch is a binary batch as a node of a newer build publishes it:
// changes of two tenants, among them one whose record kind ("paused") and
// one whose task's status ("skipped") this build has no name for. It
// returns the IDs of the changes this build can read, in order.
func newerBatch(t testing.TB) (data []byte, known []string) {
	t.Helper()
	change := func(tenant, id string, kind apollo.Kind, prev, st apollo.Status) apollo.Change {
		return withTenant(apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: "etl", Status: apollo.StatusRunning}, Kind: kind},
			Prev: apollo.Before{Name: "etl", Status: prev}, Task: apollo.Task{TaskID: id, Name: "etl", Status: st}}, tenant)
	}
	data = binBatch(t,
		change("acme", "a1", apollo.KindReport, apollo.StatusRunning, apollo.StatusFailed),
		change("acme", "a2", apollo.KindFlapping, apollo.StatusRunning, apollo.StatusRunning),
		change("beta", "b1", apollo.KindReport, apollo.StatusRunning, apollo.StatusFailed),
		change("beta", "b2", apollo.KindReport, apollo.StatusRunning, apollo.StatusManualBlocked),
		change("beta", "b3", apollo.KindReport, apollo.StatusRunning, apollo.StatusSuccess))
	for _, r := range [][2]string{{"\x08flapping", "\x06paused"}, {"\x0emanual_blocked", "\x07skipped"}} {
		if bytes.Count(data, []byte(r[0])) != 1 {
			t.Fatalf("%q is not once in the batch", r[0])
		}
		data = bytes.Replace(data, []byte(r[0]), []byte(r[1]), 1)
	}
	return data, []string{"a1", "b1", "b3"}
}

// Nodes of two builds in one cluster, in a rolling upgrade: a batch of
// changes from a newer node with a change of a record kind and one of a
// status this node has no name for. The node's listeners (the stream
// hub) get the other changes, of both tenants, and are not cut off; a
// warning says how many were passed over. Before, the batch was
// unreadable from that change on: the changes after it were lost and the
// listeners cut, which turns every stream client's live view into a
// snapshot a second for as long as the upgrade lasts.
func TestChangeOfANewerKindKeepsListeners(t *testing.T) {
	s := runNATS(t)
	nc, pub := connect(t, s), connect(t, s)
	var mu sync.Mutex
	var warned []string
	f := newFanIn(nc, apollo.NewFakeClock(time.Unix(1_764_547_200, 0)), func(msg string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		warned = append(warned, fmt.Sprint(append([]any{msg}, args...)...))
	})
	t.Cleanup(f.close)
	sub := listenFanIn(t, f, nc)
	data, known := newerBatch(t)
	if err := pub.Publish(changeSubject("acme", 1), data); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(changeSubject("acme", 1), binBatch(t, withTenant(apollo.Change{Task: apollo.Task{TaskID: "after"}}, "acme"))); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(known, "after") {
		select {
		case c, ok := <-sub.C():
			if !ok {
				t.Fatalf("cut off (%v), want change %s", sub.Err(), id)
			}
			if c.Task.TaskID != id {
				t.Fatalf("change %s, want %s", c.Task.TaskID, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no change %s", id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) != 1 || !bytes.Contains([]byte(warned[0]), []byte("passed over")) {
		t.Fatalf("warned %q, want one warning of the changes passed over", warned)
	}
}

// A node reads a newer build's batch but for the changes whose status or
// record kind it has no name for: those are passed over and counted, the
// others of both tenants read in order, and nothing is reported damaged.
// Before, the batch was refused from the first of them on.
func TestChangeOfANewerKindIsPassedOver(t *testing.T) {
	data, known := newerBatch(t)
	var got []string
	passed, err := decodeChanges(data, func(c *apollo.Change) {
		if c.Record.Tenant != c.Task.Tenant || c.Task.Name != "etl" {
			t.Errorf("change %+v", c)
		}
		got = append(got, c.Task.TaskID)
	})
	if err != nil || passed != 2 || fmt.Sprint(got) != fmt.Sprint(known) {
		t.Fatalf("read %v, %d passed over, %v; want %v, 2 passed over", got, passed, err, known)
	}
}
