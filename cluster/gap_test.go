package cluster

import (
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// The owner of a partition decides a waiting event as one server does:
// when the reorder window ends, it applies as a gap record in the
// partition's decision log, and a node that takes the partition over after
// a crash rebuilds the same run from that log (issue 15.1).
func TestGapSurvivesTakeover(t *testing.T) {
	const parts = 2
	ttl := 3 * time.Second
	c := newTestCluster(t, parts, ttl)
	c.bus.ReorderWindow = 300 * time.Millisecond
	first := c.start("gap-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	publishAll(t, first, []apollo.Event{
		{TaskID: "g1", Name: "gaps", Sequence: 1, Status: apollo.StatusRunning, Ts: now},
		{TaskID: "g1", Sequence: 3, Status: apollo.StatusPending, Ts: now + 1}, // 2 (manual_blocked) never comes
	})
	gap := waitChange(t, cl, "g1", 3, apollo.StatusPending)
	if gap.Record.Kind != apollo.KindGap || gap.Record.Reason != "1 earlier event never arrived" {
		t.Fatalf("the change that ended the wait: %+v", gap.Record)
	}

	second := c.start("gap-2")
	first.kill()
	c.waitServed(map[string]bool{first.id: true})
	task, status, err := getTask(second.http.URL, "g1")
	if err != nil || status != 200 {
		t.Fatalf("g1 on the node that took over: %d %v", status, err)
	}
	if task.Status != apollo.StatusPending || task.Sequence != 3 || len(task.History) != 2 ||
		task.History[1].Kind != apollo.KindGap || task.History[1].Reason != "1 earlier event never arrived" {
		t.Errorf("g1 rebuilt from the log: %+v", task)
	}
}
