package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/httpapi"
)

// A ping key (an agent token limited to a job prefix) may report a run
// without its job's name: the node asks the task's owner which job it
// belongs to. While that owner is gone (a takeover), the node guessed the
// task ID as the job, answered the event accepted, and the new owner
// refused it for naming another job than its task's: an accepted event
// lost. The node now answers it retry_later, and the resend after the
// takeover lands. Two tenants, each with its own key.
func TestNamelessEventOfAPingKeyDuringATakeover(t *testing.T) {
	c := newTestCluster(t, 2, 3*time.Second)
	a := c.start("pk-1")
	b := c.start("pk-2")
	c.waitBalanced()
	cl := recordChanges(t, connect(t, c.srv))

	// A task of job "backup" whose ID also starts with the key's prefix,
	// in a partition the node about to die owns.
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("backup_%d", i); a.local(Partition(cand, c.parts)) != nil {
			id = cand
		}
	}
	var toks []httpapi.Token
	secrets := map[string]string{}
	for _, tenant := range []string{"x", "y"} {
		secret, tok, err := httpapi.NewToken("key-"+tenant, httpapi.RoleAgent, tenant)
		if err != nil {
			t.Fatal(err)
		}
		tok.JobPrefix = "backup"
		toks = append(toks, tok)
		secrets[tenant] = secret
	}
	api := httptest.NewServer(httpapi.New(httpapi.Options{Bus: b.Node, Auth: httpapi.NewTokenAuth(toks)}))
	t.Cleanup(api.Close)
	post := func(tenant, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", api.URL+"/api/v1/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[tenant])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans struct {
			Results []struct {
				Result string `json:"result"`
			} `json:"results"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || len(ans.Results) != 1 {
			t.Fatalf("tenant %s: HTTP %d, %v, %+v", tenant, resp.StatusCode, err, ans)
		}
		return resp.StatusCode, ans.Results[0].Result
	}
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"x", "y"} {
		if code, r := post(tenant, fmt.Sprintf(`[{"taskID":%q,"name":"backup","sequence":1,"status":"running","ts":%d}]`, id, now)); r != "accepted" {
			t.Fatalf("tenant %s: the start: HTTP %d %s", tenant, code, r)
		}
	}
	waitChanges(t, cl, id, 1, 2)
	a.kill()
	end := fmt.Sprintf(`[{"taskID":%q,"sequence":2,"status":"success","ts":%d}]`, id, now+1)
	for _, tenant := range []string{"x", "y"} {
		if code, r := post(tenant, end); r != "retry_later" || code != http.StatusTooManyRequests {
			t.Fatalf("tenant %s: the nameless end while the owner is gone: HTTP %d %s, want 429 retry_later", tenant, code, r)
		}
	}
	c.waitServed(map[string]bool{a.id: true})
	for _, tenant := range []string{"x", "y"} {
		if code, r := post(tenant, end); r != "accepted" {
			t.Fatalf("tenant %s: the end resent after the takeover: HTTP %d %s", tenant, code, r)
		}
	}
	waitChanges(t, cl, id, 2, 2)
	for _, tenant := range []string{"x", "y"} {
		task, err := b.Get(tenant, id)
		if err != nil || task.Status != apollo.StatusSuccess || task.Name != "backup" {
			t.Fatalf("tenant %s: %+v %v, want the run of backup finished", tenant, task, err)
		}
	}
}
