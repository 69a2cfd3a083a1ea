package cluster

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// Values at the edges of what ingest accepts, reported through one node,
// come out of a graceful handover (snapshot and bookmark) and of a rebuild
// after the next owner is cut off (snapshot and log replay) as they went
// in, for two tenants, whichever node is asked.
func TestHostileValuesSurviveHandoverAndRebuild(t *testing.T) {
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.start("edge-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	ctrl := "\x01\x1f\x7f<>&\u2028\U0010FFFF\\\""
	extra := `{"s":"\u0000\u001f<b>&amp;</b>","n":-9223372036854775808,"m":18446744073709551615,"f":1e308,"u":"` + "\u2028" + `"}`
	var evs []apollo.Event
	for _, tenant := range []string{"", "ac.me_%"} {
		for i, id := range []string{strings.Repeat(ctrl, 256/len(ctrl)), "x" + ctrl, strings.Repeat("é", 128)} {
			name := strings.Repeat("\x02>", 128)
			evs = append(evs,
				apollo.Event{TaskID: id, Name: name, Sequence: apollo.MaxSequence - 1, Status: apollo.StatusPending, Ts: apollo.MinTs,
					ScheduledAt: apollo.MaxTs, Tenant: tenant, Extra: []byte(extra)},
				apollo.Event{TaskID: id, Name: name, Sequence: apollo.MaxSequence, Status: apollo.StatusRunning, Ts: apollo.MaxTs - int64(i),
					ScheduledAt: apollo.MinTs, TimeoutMs: apollo.MaxDurationMs, CostMs: apollo.MaxDurationMs, Tenant: tenant, Extra: []byte(extra)})
		}
	}
	publishAll(t, a, evs)
	for _, ev := range evs {
		waitChange(t, cl, ev.TaskID, apollo.MaxSequence, apollo.StatusRunning)
	}
	want := map[[2]string]*apollo.Task{}
	for _, ev := range evs {
		task, err := a.Get(ev.Tenant, ev.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if len(task.History) != 2 || string(task.History[1].Extra) != extra || task.History[1].Event.TaskID != ev.TaskID {
			t.Fatalf("tenant %q, task %q as reported: %+v", ev.Tenant, ev.TaskID, task)
		}
		want[[2]string{ev.Tenant, ev.TaskID}] = task
	}
	check := func(when string, nodes ...*testNode) {
		t.Helper()
		for k, w := range want {
			for _, n := range nodes {
				got, err := n.Get(k[0], k[1])
				if err != nil || !reflect.DeepEqual(got, w) {
					t.Fatalf("%s, node %s: tenant %q, task %q:\n got %+v, %v\nwant %+v", when, n.id, k[0], k[1], got, err, w)
				}
			}
		}
	}

	b := c.start("edge-2")
	a.Stop(context.Background()) // hands both partitions over
	c.waitOwners(map[string]bool{a.id: true}, "served by edge-2", func(o map[int]string) bool { return len(o) == c.parts })
	check("after the handover", b)
	d := c.start("edge-3")
	b.kill()
	c.waitOwners(map[string]bool{a.id: true, b.id: true}, "served by edge-3", func(o map[int]string) bool { return len(o) == c.parts })
	check("after the rebuild", d)
}
