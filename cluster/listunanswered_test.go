package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
)

// GET /api/v1/tasks through a node while another node's partitions do not
// answer (here that node hears no listings: a node too busy to answer in
// time looks the same to the asker) is 503 unavailable with Retry-After,
// and says which partitions did not answer and how long the node waited:
// never a page without their tasks. Before, it said only "2 of 4
// partitions did not answer" and blamed a takeover, which nothing was
// doing, so a user could not tell which node to look at.
func TestListingWhilePartitionsDoNotAnswer(t *testing.T) {
	c := newTestCluster(t, 4, DefaultLeaseTTL)
	mute, asker := c.start("mute-1"), c.start("ask-2")
	c.waitBalanced()
	now := time.Now().UnixMilli()
	for i, tenant := range []string{"", "globex"} {
		for p := range c.parts {
			id := fmt.Sprintf("%s-in-%d", tenant, p)
			for k := 0; Partition(id, c.parts) != p; k++ {
				id = fmt.Sprintf("%s-in-%d-%d", tenant, p, k)
			}
			publishAll(t, asker, []apollo.Event{{TaskID: id, Name: "quiet", Sequence: 1, Status: apollo.StatusRunning, Ts: now + int64(i), Tenant: tenant}})
		}
	}
	var silent []int
	for p := range c.parts {
		if mute.local(p) != nil {
			silent = append(silent, p)
		}
	}
	if len(silent) != 2 {
		t.Fatalf("node mute-1 serves partitions %v, want 2 of 4", silent)
	}
	if err := mute.listSub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("partitions %d, %d (2 of 4) did not answer within 2s", silent[0], silent[1])

	resp, err := http.Get(asker.http.URL + "/api/v1/tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body apiclient.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body.Error == nil ||
		body.Error.Code != apollo.EUNAVAILABLE || body.Error.Message != want || body.Error.Hint == "" {
		t.Errorf("GET /api/v1/tasks through %s: %d, Retry-After %q, %+v; want 503 unavailable %q", asker.id, resp.StatusCode, resp.Header.Get("Retry-After"), body.Error, want)
	}
	tasks, next, err := asker.List(apollo.TaskFilter{Tenant: "globex"})
	if e, ok := err.(*apollo.Error); !ok || e.Code != apollo.EUNAVAILABLE || e.Message != want {
		t.Errorf("globex's tasks through %s: %d tasks, cursor %q, %v; want %q", asker.id, len(tasks), next, err, want)
	}
	// A ping's end looks for its job's open run on every node: the same
	// partitions did not answer, and it says so, with the same causes.
	for _, tenant := range []string{"", "globex"} {
		_, out, err := asker.Ping(context.Background(), apollo.Ping{Tenant: tenant, Job: "quiet", Status: apollo.StatusSuccess, Ts: now})
		if err != nil || out.Result != bus.RetryLater || out.Err == nil || !strings.Contains(out.Err.Message, want) ||
			!strings.Contains(out.Err.Hint, "too busy") || !strings.Contains(out.Err.Hint, "cluster.leases") {
			t.Errorf("%q's ping end through %s: %+v, %v; want retry_later naming %q, a hint with both causes and cluster.leases", tenant, asker.id, out, err, want)
		}
	}
}

// GET /api/v1/tasks/{id} through a node while the task's partition does
// not answer says which of the two it is, as a listing does. An owner that
// hears the question and does not answer in time (changing, or too busy:
// here a subscriber that never answers stands in for it) is "partition p
// did not answer within 2s", with both causes and where to see who serves
// it; no subscriber at all is "no owner answering". Before, a read that
// timed out blamed a takeover, which nothing was doing.
func TestTaskReadWhileItsPartitionDoesNotAnswer(t *testing.T) {
	c := newTestCluster(t, 4, DefaultLeaseTTL)
	c.start("own-1")
	c.start("ask-2")
	c.waitBalanced()
	owner, asker := c.ownerOf(0)
	ids := map[string]string{} // tenant → a task of partition 0
	for _, tenant := range []string{"", "globex"} {
		id := tenant + "-t"
		for k := 0; Partition(id, c.parts) != 0; k++ {
			id = fmt.Sprintf("%s-t-%d", tenant, k)
		}
		ids[tenant] = id
		publishAll(t, asker, []apollo.Event{{TaskID: id, Sequence: 1, Status: apollo.StatusRunning, Ts: time.Now().UnixMilli(), Tenant: tenant}})
		if _, err := asker.Get(tenant, id); err != nil {
			t.Fatalf("%q's task %s before the owner went quiet: %v", tenant, id, err)
		}
	}
	owner.mu.Lock()
	sub := owner.leases[0].sub
	owner.mu.Unlock()
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, c.srv)
	silent, err := nc.Subscribe(rpcSubject(0), func(*nats.Msg) {}) // hears, never answers
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func(want, hintHas string) {
		t.Helper()
		resp, err := http.Get(asker.http.URL + "/api/v1/tasks/" + ids[""])
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body apiclient.ErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body.Error == nil ||
			body.Error.Code != apollo.EUNAVAILABLE || body.Error.Message != want || !strings.Contains(body.Error.Hint, hintHas) ||
			!strings.Contains(body.Error.Hint, "cluster.leases") {
			t.Errorf("GET /api/v1/tasks/%s through %s: %d, Retry-After %q, %+v; want 503 unavailable %q, a hint with %q and cluster.leases",
				ids[""], asker.id, resp.StatusCode, resp.Header.Get("Retry-After"), body.Error, want, hintHas)
		}
		task, err := asker.Get("globex", ids["globex"])
		if e, ok := err.(*apollo.Error); !ok || e.Code != apollo.EUNAVAILABLE || e.Message != want || !strings.Contains(e.Hint, hintHas) {
			t.Errorf("globex's task %s through %s: %+v, %v; want %q, a hint with %q", ids["globex"], asker.id, task, err, want, hintHas)
		}
		// A nameless event of a ping key is checked against its task's
		// job, asked of the same owner: it says the same.
		job, err := asker.JobOf("globex", ids["globex"])
		if e, ok := err.(*apollo.Error); !ok || e.Code != apollo.EUNAVAILABLE || !strings.Contains(e.Message, want) || !strings.Contains(e.Hint, hintHas) {
			t.Errorf("globex's task %s's job through %s: %q, %v; want unavailable naming %q, a hint with %q", ids["globex"], asker.id, job, err, want, hintHas)
		}
	}
	check("partition 0 did not answer within 2s", "too busy")
	if err := silent.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	check("partition 0 has no owner answering right now", "changing")
}
