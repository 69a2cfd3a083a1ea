package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/nats-io/nats.go"
)

// publishAll publishes events through n and fails unless all are accepted.
func publishAll(t *testing.T, n *testNode, evs []apollo.Event) {
	t.Helper()
	out := make([]bus.Outcome, len(evs))
	if err := n.Publish(context.Background(), evs, out); err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Result != bus.Accepted {
			t.Fatalf("event %d (%s/%d): %s %v", i, evs[i].TaskID, evs[i].Sequence, o.Result, o.Err)
		}
	}
}

// waitChange waits for a change of task id with the given sequence and
// status to be published.
func waitChange(t *testing.T, cl *changeLog, id string, seq int64, st apollo.Status) *apollo.Change {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for {
		cl.mu.Lock()
		for _, c := range cl.byTask[id] {
			if c.Record.Sequence == seq && c.Task.Status == st {
				cl.mu.Unlock()
				return c.Change
			}
		}
		cl.mu.Unlock()
		select {
		case <-cl.signal:
		case <-deadline.C:
			t.Fatalf("no change of %s to %s (sequence %d) within 15s", id, st, seq)
		}
	}
}

// ownerOf returns the node serving partition p, and another node.
func (c *testCluster) ownerOf(p int) (owner, other *testNode) {
	for _, n := range c.nodes {
		if n.local(p) != nil {
			owner = n
		} else if other == nil {
			other = n
		}
	}
	return owner, other
}

// TestQueriesFromAnyNode asks a node that does not own a task about it
// (Get, JobOf, Correct over HTTP and directly), and lists tasks across
// nodes page by page.
func TestQueriesFromAnyNode(t *testing.T) {
	c := newTestCluster(t, 6, 3*time.Second)
	for i := range 3 {
		c.start(fmt.Sprintf("q-%d", i+1))
	}
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	var evs []apollo.Event
	const tasks = 60
	for i := range tasks {
		evs = append(evs, apollo.Event{TaskID: fmt.Sprintf("q-%02d", i), Name: "query", Sequence: 1, Status: apollo.StatusRunning, Ts: now})
	}
	publishAll(t, c.nodes[0], evs)
	for _, ev := range evs {
		waitChange(t, cl, ev.TaskID, 1, apollo.StatusRunning)
	}

	id := "q-07"
	owner, other := c.ownerOf(Partition(id, c.parts))
	task, _, err := getTask(other.http.URL, id)
	if err != nil || task.Status != apollo.StatusRunning || len(task.History) != 1 {
		t.Fatalf("GET %s from a node that does not own it: %+v, %v", id, task, err)
	}
	if _, status, _ := getTask(other.http.URL, "no-such-task"); status != 404 {
		t.Errorf("GET of an unknown task from another node: %d, want 404", status)
	}
	j, err := other.JobOf("", id)
	j2, err2 := other.JobOf("", "no-such-task")
	if j != "query" || j2 != "" || err != nil || err2 != nil {
		t.Errorf("JobOf from a node that does not own the task: %q (%v), and %q (%v) for an unknown one", j, err, j2, err2)
	}
	fixed, err := other.Correct(context.Background(), "", id, apollo.StatusFailed, "ops", "killed by hand")
	if err != nil || fixed.Status != apollo.StatusFailed {
		t.Fatalf("Correct through another node: %+v, %v", fixed, err)
	}
	if _, err := other.Correct(context.Background(), "", id, apollo.StatusFailed, "ops", ""); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Errorf("a correction without a reason through another node: %v, want the owner's invalid error", err)
	}
	if got, _ := owner.Get("", id); got.Status != apollo.StatusFailed {
		t.Errorf("the owner shows %s after the correction", got.Status)
	}

	// Page through everything from the third node, 7 at a time.
	var seen []string
	cursor := ""
	for {
		page, next, err := c.nodes[2].List(apollo.TaskFilter{Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(page); i++ {
			a, b := page[i-1], page[i]
			if a.CreatedAt < b.CreatedAt || a.CreatedAt == b.CreatedAt && a.TaskID < b.TaskID {
				t.Fatalf("page out of order: %s (%d) before %s (%d)", a.TaskID, a.CreatedAt, b.TaskID, b.CreatedAt)
			}
		}
		for _, tk := range page {
			seen = append(seen, tk.TaskID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(seen)
	if len(seen) != tasks || len(slices.Compact(slices.Clone(seen))) != tasks {
		t.Fatalf("listing across nodes gave %d tasks (%d distinct), want %d", len(seen), len(slices.Compact(slices.Clone(seen))), tasks)
	}
	failed, _, err := c.nodes[1].List(apollo.TaskFilter{Status: apollo.StatusFailed})
	if err != nil || len(failed) != 1 || failed[0].TaskID != id {
		t.Errorf("listing failed tasks: %v, %v; want only %s", failed, err, id)
	}
	if _, _, err := c.nodes[1].List(apollo.TaskFilter{Cursor: "not a cursor"}); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Errorf("a bad cursor: %v", err)
	}
}

// TestOwnRecordsSurviveAHandover shows why a partition's log holds the
// bus's decisions and not only the reported events: a timeout the owner
// decided stays decided on the next owner, and the late success after it
// stays refused, as on one server.
func TestOwnRecordsSurviveAHandover(t *testing.T) {
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.start("own-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	publishAll(t, a, []apollo.Event{{TaskID: "slow", Sequence: 1, Status: apollo.StatusRunning, Ts: now, TimeoutMs: 100}})
	to := waitChange(t, cl, "slow", 1, apollo.StatusTimeout)
	if to.Record.Kind != apollo.KindTimeout {
		t.Fatalf("the timeout change is a %s record", to.Record.Kind)
	}
	b := c.start("own-2") // takes one partition over; a keeps one
	c.waitServed(map[string]bool{})
	a.Stop(context.Background()) // hands the other over: b now owns both
	c.waitServed(map[string]bool{"own-1": true})
	got, err := b.Get("", "slow")
	if err != nil || got.Status != apollo.StatusTimeout || len(got.History) != 2 || got.History[1].Kind != apollo.KindTimeout {
		t.Fatalf("after the handover: %+v, %v; want the timeout record the first owner decided", got, err)
	}
	// The late success, then a sentinel of the same partition: the
	// partition decides in stream order, so once the sentinel's change is
	// out, the success has been decided.
	sentinel := "sentinel-0"
	for i := 1; Partition(sentinel, c.parts) != Partition("slow", c.parts); i++ {
		sentinel = fmt.Sprintf("sentinel-%d", i)
	}
	publishAll(t, b, []apollo.Event{
		{TaskID: "slow", Sequence: 2, Status: apollo.StatusSuccess, Ts: now + 5000},
		{TaskID: sentinel, Sequence: 1, Status: apollo.StatusPending, Ts: now},
	})
	waitChange(t, cl, sentinel, 1, apollo.StatusPending)
	if got, _ := b.Get("", "slow"); got.Status != apollo.StatusTimeout {
		t.Fatalf("a success after the timeout changed the task: %s", got.Status)
	}
	if st := b.local(Partition("slow", c.parts)).bus.Stats(); st.Illegal != 1 {
		t.Errorf("the late success was not counted as illegal: %+v", st)
	}
}

// TestTenantsStayApart publishes the same task ID for two tenants (one
// whose name needs escaping in a subject): each tenant sees its own task,
// from any node, in listings, and on the stream.
func TestTenantsStayApart(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	a := c.start("ten-1")
	b := c.start("ten-2")
	c.waitServed(nil)
	sub, err := a.SubscribeChanges(10)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	now := time.Now().UnixMilli()
	publishAll(t, a, []apollo.Event{
		{TaskID: "shared", Tenant: "acme.eu", Sequence: 1, Status: apollo.StatusRunning, Ts: now},
		{TaskID: "shared", Tenant: "", Sequence: 1, Status: apollo.StatusPending, Ts: now},
	})
	seen := map[string]apollo.Status{}
	for len(seen) < 2 {
		select {
		case ch := <-sub.C():
			if ch.Record.Tenant != ch.Task.Tenant {
				t.Errorf("a change of tenant %q carries the record's tenant %q", ch.Task.Tenant, ch.Record.Tenant)
			}
			seen[ch.Task.Tenant] = ch.Task.Status
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("changes seen: %v", seen)
		}
	}
	if seen["acme.eu"] != apollo.StatusRunning || seen[""] != apollo.StatusPending {
		t.Fatalf("changes by tenant: %v", seen)
	}
	for _, n := range []*testNode{a, b} {
		got, err := n.Get("acme.eu", "shared")
		if err != nil || got.Status != apollo.StatusRunning || got.Tenant != "acme.eu" {
			t.Errorf("node %s: Get(acme.eu, shared) = %+v, %v", n.id, got, err)
		}
		if _, err := n.Get("other", "shared"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
			t.Errorf("node %s: another tenant's Get: %v, want not found", n.id, err)
		}
		page, _, err := n.List(apollo.TaskFilter{Tenant: "acme.eu"})
		if err != nil || len(page) != 1 || page[0].Status != apollo.StatusRunning {
			t.Errorf("node %s: the tenant's listing: %+v, %v", n.id, page, err)
		}
	}
}

// A node reads the answers of other nodes, which may run another version
// or be damaged: whatever the bytes, decodeReply returns a reply or an
// error, never panics, and a reply it accepts reads back the same once
// written again. The request side (serveTask) reads rpcRequest the same
// way.
func FuzzDecodeReply(f *testing.F) {
	task := apollo.Task{TaskID: "t-1", Name: "job", Status: apollo.StatusRunning, Sequence: 2, UpdatedAt: 9}
	for _, r := range []rpcReply{{Task: &task}, {Tasks: []apollo.Task{task, task}, Partitions: []int{0, 3}}, {Job: "job"},
		{Err: &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "m"}}, {Internal: "boom"}} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"op":"correct","tenant":"a","taskID":"t","status":"success","filter":{"prefix":"x"}}`))
	f.Add([]byte(`{"task":{"status":"no-such-status"}}`))
	f.Add([]byte(`{"tasks":[null,{}],"partitions":[-1,9223372036854775807]}`))
	// A newer node's answers: history entries and a task this build
	// cannot name (replynewer_test.go).
	f.Add([]byte(`{"task":` + string(newerTask(f, "acme", "t-1", 1, false)) + `}`))
	f.Add([]byte(`{"tasks":[` + string(newerTask(f, "acme", "t-1", 1, true)) + `,` + string(newerTask(f, "beta", "t-1", 2, false)) + `]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rpcRequest
		_ = json.Unmarshal(data, &req)
		r, err := decodeReply(data)
		if err != nil {
			if r != nil {
				t.Fatalf("an error (%v) and a reply", err)
			}
			return
		}
		for _, tk := range append(r.Tasks, *cmp.Or(r.Task, &apollo.Task{})) {
			for _, h := range tk.History {
				if !h.Kind.Valid() {
					t.Fatalf("a history entry of no kind read: %+v", h)
				}
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a reply read from %q cannot be written: %v", data, err)
		}
		again, err := decodeReply(b)
		if err != nil {
			t.Fatalf("%s, read from %q, does not read back: %v", b, data, err)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Fatalf("read back differently:\n%s\n%s", b, b2)
		}
	})
}

// A correction is a decision like any other: made through a node, it is
// in the partition's log, and the node that takes the partition after its
// owner died shows it. Two tenants hold a task of the same ID; only one is
// corrected.
func TestACorrectionSurvivesItsOwnersDeath(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.start("a")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	const id = "fix-1"
	publishAll(t, a, []apollo.Event{
		{TaskID: id, Name: "fix", Sequence: 1, Status: apollo.StatusRunning, Ts: now},
		{Tenant: "blue", TaskID: id, Name: "fix", Sequence: 1, Status: apollo.StatusRunning, Ts: now},
	})
	waitChanges(t, cl, id, 1, 2) // both applied
	if _, err := a.Correct(context.Background(), "blue", id, apollo.StatusFailed, "ops", "killed by hand"); err != nil {
		t.Fatal(err)
	}
	a.kill()
	b := c.start("b")
	c.waitServed(map[string]bool{"a": true})
	blue, err := b.Get("blue", id)
	if err != nil || blue.Status != apollo.StatusFailed || !slices.ContainsFunc(blue.History, func(h apollo.Record) bool { return h.Reason == "killed by hand" }) {
		t.Fatalf("the corrected task after its owner died: %+v, %v", blue, err)
	}
	if other, err := b.Get("", id); err != nil || other.Status != apollo.StatusRunning {
		t.Fatalf("the other tenant's task of the same ID: %+v, %v", other, err)
	}
}

// A query whose task ID is not UTF-8 names no task, on the owner as on
// any other node. Before, the asking node sent it to the owner in JSON,
// which changed the byte \xff into U+FFFD: with 4 partitions both IDs fall
// in partition 2, so GET /api/v1/tasks/%FF through another node showed
// task "\ufffd", and a correction of %FF corrected it.
func TestNotUTF8TaskIDNamesNoTask(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	c.start("utf-1")
	c.start("utf-2")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	const id = "\ufffd"
	if Partition(id, c.parts) != Partition("\xff", c.parts) {
		t.Fatal("the test needs both IDs in one partition")
	}
	publishAll(t, c.nodes[0], []apollo.Event{{TaskID: id, Name: "utf", Sequence: 1, Status: apollo.StatusRunning, Ts: time.Now().UnixMilli()}})
	waitChange(t, cl, id, 1, apollo.StatusRunning)
	owner, other := c.ownerOf(Partition(id, c.parts))
	for _, n := range []*testNode{owner, other} {
		if task, status, err := getTask(n.http.URL, "%FF"); status != http.StatusNotFound {
			t.Errorf("GET /api/v1/tasks/%%FF through %s: %d %+v %v, want 404", n.opts.NodeID, status, task, err)
		}
		resp, err := http.Post(n.http.URL+"/api/v1/tasks/%FF/status", "application/json",
			strings.NewReader(`{"status":"failed","reason":"not this one"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("correcting %%FF through %s: %d, want 404", n.opts.NodeID, resp.StatusCode)
		}
	}
	if task, _, err := getTask(other.http.URL, "%EF%BF%BD"); err != nil || task.Status != apollo.StatusRunning {
		t.Errorf("task %q after the corrections of %%FF: %+v, %v; want it running", id, task, err)
	}
}

// While a partition changes hands, its old owner (lease lost, local
// deadline not yet passed) and its new one may both answer a listing: the
// page shows each task once, as the owner that changed it last has it.
// Here the old owner is a responder on the listing subject that answers
// for the task's partition with the task as it was before its last event.
func TestListDuringAHandoverShowsEachTaskOnce(t *testing.T) {
	c := newTestCluster(t, 4, 3*time.Second)
	node := c.start("h-1")
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	now := time.Now().UnixMilli()
	ids := map[string]string{"": "moving-1", "acme": "moving-2"} // a task of each tenant
	for tenant, id := range ids {
		publishAll(t, node, []apollo.Event{
			{TaskID: id, Name: "handover", Sequence: 1, Status: apollo.StatusPending, Ts: now, Tenant: tenant},
			{TaskID: id, Name: "handover", Sequence: 2, Status: apollo.StatusRunning, Ts: now + 1, Tenant: tenant},
		})
	}
	for _, id := range ids {
		waitChange(t, cl, id, 2, apollo.StatusRunning)
	}
	nc := connect(t, c.srv)
	sub, err := nc.Subscribe(rpcList, func(m *nats.Msg) {
		var req rpcRequest
		json.Unmarshal(m.Data, &req)
		id := ids[req.Filter.Tenant]
		stale := apollo.Task{TaskID: id, Name: "handover", Tenant: req.Filter.Tenant, Status: apollo.StatusPending, Sequence: 1, CreatedAt: now, UpdatedAt: now}
		data, _ := json.Marshal(rpcReply{Tasks: []apollo.Task{stale}, Partitions: []int{Partition(id, c.parts)}})
		m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()
	// Which answer comes first is the network's choice; the stale one
	// usually does (it needs no bus), and in 20 tries surely once.
	for range 20 {
		for tenant, id := range ids {
			page, _, err := node.List(apollo.TaskFilter{Tenant: tenant})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) != 1 || page[0].TaskID != id || page[0].Status != apollo.StatusRunning {
				t.Fatalf("tenant %q: the listing during a handover shows %+v, want the task once, running", tenant, page)
			}
		}
	}
}
