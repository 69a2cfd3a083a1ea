package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
)

// TestSnapshotThenTakeover snapshots a partition, which trims its log,
// adds events after it, and cuts the owner off: the next owner reads the
// snapshot the log's marker names (not a newer object nobody marked) and
// only the log after it, and has every task as it was.
func TestSnapshotThenTakeover(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	a := c.start("snap-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	var before, after []apollo.Event
	for i := range 50 {
		id := fmt.Sprintf("s-%02d", i)
		before = append(before, apollo.Event{TaskID: id, Name: "snap", Sequence: 1, Status: apollo.StatusRunning, Ts: now})
		after = append(after, apollo.Event{TaskID: id, Name: "snap", Sequence: 2, Status: apollo.StatusFailed, Ts: now + 1000})
	}
	publishAll(t, a, before)
	for _, ev := range before {
		waitChange(t, cl, ev.TaskID, 1, apollo.StatusRunning)
	}
	pt := a.local(0)
	if err := pt.snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logMessages(t, a); got > 1 {
		t.Errorf("the log holds %d messages after the snapshot, want only the marker", got)
	}
	publishAll(t, a, after[:25])
	for _, ev := range after[:25] {
		waitChange(t, cl, ev.TaskID, 2, apollo.StatusFailed)
	}
	// An object a former owner stored but never marked is ignored.
	if _, err := a.snaps.PutBytes(context.Background(), "p0000-999999", []byte("stale")); err != nil {
		t.Fatal(err)
	}

	b := c.start("snap-2")
	a.kill()
	c.waitServed(map[string]bool{a.id: true})
	publishAll(t, b, after[25:])
	for _, ev := range after[25:] {
		waitChange(t, cl, ev.TaskID, 2, apollo.StatusFailed)
	}
	ps := b.NodeStats().Partitions[0]
	if ps.Snapshot != pt.snapName || ps.Replayed != 25 {
		t.Errorf("rebuilt from snapshot %q and %d records; want %q and the 25 records after it", ps.Snapshot, ps.Replayed, pt.snapName)
	}
	for _, ev := range after {
		got, err := b.Get("", ev.TaskID)
		if err != nil || got.Status != apollo.StatusFailed || len(got.History) != 2 {
			t.Fatalf("%s: %+v, %v", ev.TaskID, got, err)
		}
	}
	sum := b.local(0).agg.Rolling("", "snap")
	if sum.Count != 50 || sum.Failed != 50 || sum.Started != 50 {
		t.Errorf("the rebuilt metrics: %+v; want 50 started and failed", sum)
	}
}

// logMessages counts the messages in partition 0's log.
func logMessages(t *testing.T, n *testNode) uint64 {
	t.Helper()
	info, err := n.logs.Info(context.Background(), jetstream.WithSubjectFilter(logSubject(0)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[logSubject(0)]
}

// A partition keeps its snapshot buffer for the next snapshot and writes
// the bus section's length in after the section. Two snapshots of growing
// state (the second's bus section needs a longer length field than the
// first's), then a takeover: the next owner has every task from the
// second snapshot alone.
func TestSecondSnapshotReusesTheBuffer(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	a := c.start("reuse-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	events := func(from, n int, pad int) []apollo.Event {
		var evs []apollo.Event
		for i := from; i < from+n; i++ {
			id := fmt.Sprintf("r-%04d-%s", i, strings.Repeat("p", pad))
			evs = append(evs, apollo.Event{TaskID: id, Name: "reuse", Sequence: 1, Status: apollo.StatusRunning, Ts: now})
		}
		return evs
	}
	first, second := events(0, 20, 10), events(20, 400, 200)
	pt := a.local(0)
	for _, evs := range [][]apollo.Event{first, second} {
		publishAll(t, a, evs)
		for _, ev := range evs {
			waitChange(t, cl, ev.TaskID, 1, apollo.StatusRunning)
		}
		if err := pt.snapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := pt.snapBuf.Len(); n < 1<<14 {
		t.Fatalf("the second snapshot is %d bytes; the test wants a bus section over 16 KiB", n)
	}
	b := c.start("reuse-2")
	a.kill()
	c.waitServed(map[string]bool{a.id: true})
	ps := b.NodeStats().Partitions[0]
	if ps.Snapshot != pt.snapName || ps.Replayed != 0 {
		t.Errorf("rebuilt from snapshot %q and %d records; want %q and none", ps.Snapshot, ps.Replayed, pt.snapName)
	}
	for _, ev := range append(first, second...) {
		if got, err := b.Get("", ev.TaskID); err != nil || got.Status != apollo.StatusRunning {
			t.Fatalf("%.12s…: %+v, %v", ev.TaskID, got, err)
		}
	}
}
