package cluster

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// Messages that no owner wrote, put on a partition's decision log by
// someone else (bytes that are no record, an input position at the top
// of uint64, a snapshot marker naming no snapshot): the owner's next
// append is refused (its fence moved), the partition is rebuilt without
// them, saying so, and every event accepted before and after, in two
// tenants with the same task IDs, is applied. Before, the rebuild failed
// on them, at every claim of every node, for as long as they were in the
// log: the partition was served by no one, its events answered accepted
// and never applied, and each claim replayed the log up to them again.
func TestMessagesNoOwnerWroteOnALogArePassedOver(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	logs := &syncBuffer{}
	a := c.startWith("fl-1", func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	c.waitServed(nil)
	other := c.startWith("fl-2", func(o *Options) { o.testNoClaim = true })
	const ts = 1_764_547_200_000
	tenants := []string{"", "acme"}
	for _, tenant := range tenants {
		publishAll(t, other, []apollo.Event{{Tenant: tenant, TaskID: "run", Name: "etl", Sequence: 1, Status: apollo.StatusRunning, Ts: ts}})
	}
	js, err := jetstream.New(connect(t, c.srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testwait.Context(t)
	rogue := []*nats.Msg{
		{Subject: logSubject(0), Data: []byte("\x05garbage, no record")},
		{Subject: logSubject(0), Header: nats.Header{hdrInput: {"18446744073709551615"}}},
		{Subject: logSubject(0), Header: nats.Header{hdrSnapshot: {"p0-999999"}, hdrCovers: {"999999"}, hdrInput: {"999999"}}},
	}
	for _, m := range rogue {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range tenants {
		publishAll(t, other, []apollo.Event{{Tenant: tenant, TaskID: "run", Name: "etl", Sequence: 2, Status: apollo.StatusSuccess, Ts: ts + 1}})
	}
	for _, tenant := range tenants {
		deadline := time.Now().Add(testwait.Timeout(t))
		for {
			task, err := other.Get(tenant, "run")
			if err == nil && task.Sequence == 2 {
				if task.Tenant != tenant || task.Status != apollo.StatusSuccess || len(task.History) != 2 {
					t.Errorf("tenant %q: %+v", tenant, task)
				}
				break
			}
			if time.Now().After(deadline) {
				c.dump("run")
				t.Fatalf("tenant %q: the task after messages no owner wrote were put on its log: %+v, %v\n%s", tenant, task, err, logs.String())
			}
			time.Sleep(20 * time.Millisecond) // polls the node's state; nothing to wait on
		}
	}
	if n := a.NodeStats().LogForeign; n < uint64(len(rogue)) {
		t.Errorf("the node counted %d messages no owner wrote, want at least %d", n, len(rogue))
	}
	if s := logs.String(); !strings.Contains(s, "a message on the partition's log that no owner wrote was passed over") {
		t.Errorf("no warning of the messages passed over:\n%s", s)
	}
}
