package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// TestAddingANodeHandsPartitionsOver starts one node, which takes every
// partition, then a second: half the partitions move to it through a
// graceful handover (a snapshot and a bookmark in the log, so the new
// owner reads no log record and no event twice), and tasks started before
// the move finish after it.
func TestAddingANodeHandsPartitionsOver(t *testing.T) {
	const parts = 4
	c := newTestCluster(t, parts, 3*time.Second)
	a := c.start("grow-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	var first, second []apollo.Event
	for i := range 40 {
		id := fmt.Sprintf("g-%02d", i)
		first = append(first, apollo.Event{TaskID: id, Sequence: 1, Status: apollo.StatusRunning, Ts: now})
		second = append(second, apollo.Event{TaskID: id, Sequence: 2, Status: apollo.StatusSuccess, Ts: now + 1000})
	}
	publishAll(t, a, first)
	for _, ev := range first {
		waitChange(t, cl, ev.TaskID, 1, apollo.StatusRunning)
	}
	b := c.start("grow-2")
	moved := 0
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for moved < parts/2 {
		select {
		case e := <-c.events:
			if e.node == b.id && e.event == "taken" {
				moved++
			}
		case <-deadline.C:
			t.Fatalf("only %d partitions moved to the new node", moved)
		}
	}
	publishAll(t, b, second)
	for _, ev := range second {
		waitChange(t, cl, ev.TaskID, 2, apollo.StatusSuccess)
	}
	dup := int64(0)
	for _, ps := range b.NodeStats().Partitions {
		dup += ps.Bus.Duplicate
		if ps.Snapshot == "" || ps.Replayed != 0 {
			t.Errorf("partition %d: rebuilt from snapshot %q and %d log records; a handover leaves a snapshot of everything",
				ps.Partition, ps.Snapshot, ps.Replayed)
		}
	}
	if dup != 0 {
		t.Errorf("the new node read %d events twice after a graceful handover", dup)
	}
	if n := len(a.NodeStats().Partitions); n != parts/2 {
		t.Errorf("the first node serves %d partitions, want %d", n, parts/2)
	}
	cl.mu.Lock()
	if len(cl.resyncs) != 0 { // every change before a handover was published
		t.Errorf("handovers asked the streams to resynchronise: %v", cl.resyncs)
	}
	cl.mu.Unlock()
	for _, ev := range second {
		got, err := a.Get("", ev.TaskID)
		if err != nil || got.Status != apollo.StatusSuccess || len(got.History) != 2 {
			t.Fatalf("%s: %+v, %v", ev.TaskID, got, err)
		}
	}
}

// TestPartitionCountIsChecked refuses a node whose partition count is not
// the cluster's.
func TestPartitionCountIsChecked(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	c.start("count-1")
	opts := c.options("count-2", connect(t, c.srv))
	opts.Partitions = 8
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	err = n.Start(context.Background())
	if apollo.ErrorCode(err) != apollo.EINVALID {
		t.Fatalf("a node with 8 partitions in a cluster of 4 started: %v", err)
	}
}

// TestDecisionLogIsFenced writes a partition's log as two owners would: the
// one that fenced last wins, and the other's next append is refused.
func TestDecisionLogIsFenced(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	nc := connect(t, c.srv)
	n, err := New(c.options("fence", nc))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	old := newDecisionLog(n.js, 0, "old", 0, 0, 0, time.Second)
	defer old.Close()
	if err := old.mark(nil); err != nil {
		t.Fatal(err)
	}
	lsn, _ := old.Append([]byte("one"))
	if err := old.Wait(context.Background(), lsn); err != nil {
		t.Fatal(err)
	}
	// The new owner replays to the end and fences.
	var recs []string
	end, _, err := n.replayLog(context.Background(), 0, 0, func(r []byte) error { recs = append(recs, string(r)); return nil })
	if err != nil || len(recs) != 1 || recs[0] != "one" {
		t.Fatalf("replay: %q, %v", recs, err)
	}
	nw := newDecisionLog(n.js, 0, "new", end, 1, 0, time.Second)
	defer nw.Close()
	if err := nw.mark(nil); err != nil {
		t.Fatal(err)
	}
	lsn, _ = old.Append([]byte("stale"))
	if err := old.Wait(context.Background(), lsn); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner's append after the fence: %v, want ErrFenced", err)
	}
	if _, err := old.Append([]byte("more")); !errors.Is(err, ErrFenced) {
		t.Errorf("the fenced log took another record: %v", err)
	}
	lsn, _ = nw.Append([]byte("two"))
	if err := nw.Wait(context.Background(), lsn); err != nil {
		t.Fatal(err)
	}
	recs = nil
	if _, _, err := n.replayLog(context.Background(), 0, 0, func(r []byte) error { recs = append(recs, string(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(recs) != "[one two]" {
		t.Errorf("the log holds %q, want [one two]", recs)
	}
}

// TestDecisionLogReusesItsBuffer: once a batch is published, the next one
// is gathered in its buffer, and what was published reads back unchanged.
// One record per round, each waited for, makes one batch per round.
func TestDecisionLogReusesItsBuffer(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	n, err := New(c.options("reuse", connect(t, c.srv)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := newDecisionLog(n.js, 0, "reuse", 0, 0, 0, 5*time.Second)
	defer l.Close()
	var want []string
	var bufs []*byte // the first byte of the buffer each round's batch was published from
	for round := range 5 {
		rec := fmt.Sprintf("round %d: %s", round, strings.Repeat("x", round*100))
		want = append(want, rec)
		lsn, err := l.Append([]byte(rec))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(context.Background(), lsn); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		spare := l.spare
		l.mu.Unlock()
		if cap(spare) == 0 {
			t.Fatalf("round %d: the log kept no buffer for the next batch", round)
		}
		bufs = append(bufs, &spare[:1][0])
	}
	for i := 1; i < len(bufs); i++ {
		if bufs[i] != bufs[0] {
			t.Fatalf("round %d's batch was gathered in a new buffer", i)
		}
	}
	var got []string
	if _, _, err := n.replayLog(context.Background(), 0, 0, func(r []byte) error { got = append(got, string(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the log holds\n%q\nwant\n%q", got, want)
	}
}

// TestChangeListenersResyncAfterANodeDies: when a node dies, the node
// that takes its partitions makes every node's change listeners (the
// stream hubs) resynchronise, since changes the dead node made durable
// may never have been published. A graceful handover does not.
func TestChangeListenersResyncAfterANodeDies(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	a := c.start("rs-1")
	b := c.start("rs-2") // takes half of a's partitions by handover
	owners := c.waitServed(nil)
	sub, err := a.SubscribeChanges(100)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// A change from each node comes through: the handovers cut nothing.
	var ids []string
	for _, n := range []*testNode{a, b} {
		id := ""
		for i := 0; id == "" || owners[Partition(id, c.parts)] != n.id; i++ {
			id = fmt.Sprintf("rs-%d", i)
		}
		ids = append(ids, id)
	}
	publishAll(t, a, []apollo.Event{
		{TaskID: ids[0], Sequence: 1, Status: apollo.StatusRunning, Ts: time.Now().UnixMilli()},
		{TaskID: ids[1], Sequence: 1, Status: apollo.StatusRunning, Ts: time.Now().UnixMilli()},
	})
	for range ids {
		select {
		case _, ok := <-sub.C():
			if !ok {
				t.Fatalf("the listener was cut after graceful handovers: %v", sub.Err())
			}
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("a change never came")
		}
	}
	b.kill()
	c.waitServed(map[string]bool{b.id: true})
	for {
		select {
		case ch, ok := <-sub.C():
			if ok {
				t.Logf("a change before the cut: %s %v", ch.Task.TaskID, ch.Task.Status)
				continue
			}
			if !errors.Is(sub.Err(), ErrChangesLost) {
				t.Fatalf("the listener ended with %v, want %v", sub.Err(), ErrChangesLost)
			}
			return
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("the listener was not cut after the node died and its partitions were taken")
		}
	}
}

// TestChangesFromEveryNode subscribes on one node and sees the changes
// applied on the others.
func TestChangesFromEveryNode(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	a := c.start("fan-1")
	c.start("fan-2")
	owners := c.waitServed(nil)
	sub, err := a.SubscribeChanges(100)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	id := "fan-0"
	for i := 1; owners[Partition(id, c.parts)] == a.id; i++ {
		id = fmt.Sprintf("fan-%d", i)
	}
	publishAll(t, a, []apollo.Event{{TaskID: id, Sequence: 1, Status: apollo.StatusRunning, Ts: time.Now().UnixMilli()}})
	select {
	case ch := <-sub.C():
		if ch.Task.TaskID != id || ch.Task.Status != apollo.StatusRunning {
			t.Fatalf("got the change %+v", ch)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the change applied on the other node never came")
	}
	sub.Close()
	if _, ok := <-sub.C(); ok {
		t.Error("C is open after Close")
	}
	if sub.Err() != nil {
		t.Errorf("Err after Close: %v", sub.Err())
	}
}

var _ = jetstream.ErrKeyExists
