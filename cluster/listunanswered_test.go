package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
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
	for _, s := range mute.rpcSubs {
		if err := s.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
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
}
