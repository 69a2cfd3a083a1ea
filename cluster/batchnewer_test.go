package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// noPass fails the test for an event decodeBatch passes over.
func noPass(t testing.TB) func(apollo.Event, error) {
	return func(ev apollo.Event, err error) { t.Errorf("event %s:%d passed over: %v", ev.TaskID, ev.Sequence, err) }
}

// newerEventBatch is a batch of three events as a node of a newer build
// forwards it, the middle one of a status ("skipped") this build has no
// name for. The IDs start with prefix.
func newerEventBatch(t testing.TB, prefix string) []byte {
	t.Helper()
	data := batchOf(
		apollo.Event{TaskID: prefix + "1", Name: "etl", Sequence: 1, Status: apollo.StatusPending, Ts: 1_764_547_200_000},
		apollo.Event{TaskID: prefix + "2", Name: "etl", Sequence: 1, Status: apollo.StatusManualBlocked, Ts: 1_764_547_200_000},
		apollo.Event{TaskID: prefix + "3", Name: "etl", Sequence: 1, Status: apollo.StatusRunning, Ts: 1_764_547_200_000, Extra: []byte(`{"n":3}`)})
	old, newer := []byte("\x0emanual_blocked"), []byte("\x07skipped")
	if bytes.Count(data, old) != 1 {
		t.Fatalf("%q is not once in the batch", old)
	}
	return bytes.Replace(data, old, newer, 1)
}

// The decoder reads past an event of a status it has no name for: that
// one goes to pass, alone, with why; those around it come out in order,
// whole. Before, the batch ended at it.
func TestEventOfANewerStatusIsPassedOver(t *testing.T) {
	var got []string
	var passed []error
	err := decodeBatch(newerEventBatch(t, "a"), func(ev apollo.Event) {
		got = append(got, fmt.Sprintf("%s:%s", ev.TaskID, ev.Status))
	}, func(ev apollo.Event, err error) {
		if ev.TaskID != "a2" {
			t.Errorf("event %+v passed over", ev)
		}
		passed = append(passed, err)
	})
	if err != nil || fmt.Sprint(got) != "[a1:pending a3:running]" || len(passed) != 1 ||
		!strings.Contains(passed[0].Error(), `unknown status "skipped"`) {
		t.Fatalf("read %v, passed over %v, %v; want a1 and a3, a2 passed over for its status", got, passed, err)
	}
}

// Nodes of two builds in one cluster, in a rolling upgrade: a newer node
// forwards batches of two tenants to an older owner, each with an event
// of a status the owner has no name for in the middle. The owner applies
// the events around it, in both tenants (the forwarding node answered
// them accepted), counts the one it passes over as invalid (GET
// /api/v1/system, partitions[].invalid) and warns that a newer node sent
// it. Before, every event after it in its batch was lost.
func TestEventBatchOfANewerNodeIsAppliedAroundAnUnknownStatus(t *testing.T) {
	c := newTestCluster(t, 1, 10*time.Second)
	logs := &syncBuffer{}
	node := c.startWith("old-1", func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	c.waitServed(nil)
	changes := recordChanges(t, connect(t, c.srv))
	js, err := jetstream.New(connect(t, c.srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testwait.Context(t)
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := js.Publish(ctx, EventSubject(tenant, 0), newerEventBatch(t, tenant+"-")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range []string{"acme", "beta"} {
		waitChange(t, changes, tenant+"-1", 1, apollo.StatusPending)
		waitChange(t, changes, tenant+"-3", 1, apollo.StatusRunning)
		task, err := node.Get(tenant, tenant+"-3")
		if err != nil || task.Status != apollo.StatusRunning || string(task.History[0].Extra) != `{"n":3}` {
			t.Fatalf("tenant %s: task 3 %+v, %v", tenant, task, err)
		}
		if _, err := node.Get(tenant, tenant+"-2"); err == nil {
			t.Fatalf("tenant %s: the event of an unknown status made a task", tenant)
		}
	}
	if st := node.NodeStats().Partitions[0]; st.Invalid != 2 || st.Applied != 4 {
		t.Fatalf("partition stats: %d invalid, %d applied; want 2 passed over as invalid and 4 applied", st.Invalid, st.Applied)
	}
	if s := logs.String(); !strings.Contains(s, "event passed over, the rest of its batch applied") || !strings.Contains(s, `unknown status \"skipped\"`) {
		t.Fatalf("no warning of the event passed over in the log:\n%s", s)
	}
}

// syncBuffer is a log that the node writes and the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
