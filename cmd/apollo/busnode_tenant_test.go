package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// busNodeWithTenants starts a scale-out node of two partitions on its
// own NATS server, with an admin of the default tenant and of each of
// tenants (tokens returned by tenant), and waits until it serves both
// partitions.
func busNodeWithTenants(t *testing.T, id string) (*proc, map[string]string) {
	t.Helper()
	start, tokens := busNodesWithTenants(t, startNATS(t).ClientURL(), 2)
	p := start(id)
	servedWhenReady(t, p.addr)
	return p, tokens
}

// busNodesWithTenants writes the configuration of busNodeWithTenants and
// returns what starts a node of it on the NATS server at url.
func busNodesWithTenants(t *testing.T, url string, partitions int) (func(id string, extra ...string) *proc, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString("auth:\n  tokens:\n")
	for _, tenant := range append([]string{""}, tenants...) {
		secret, tok, err := httpapi.NewToken(tenant+"-admin", httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		tokens[tenant] = secret
		fmt.Fprintf(&cfg, "    - {name: %s-admin, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	path := filepath.Join(t.TempDir(), "apollo.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(id string, extra ...string) *proc {
		return startApollo(t, append([]string{"bus", "--config", path, "--nats", url, "--partitions", strconv.Itoa(partitions),
			"--node-id", id, "--listen", "127.0.0.1:0"}, extra...)...)
	}, tokens
}

// postAs posts body to addr's events as the holder of secret and returns
// the answer's body.
func postAs(t *testing.T, addr, secret, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/api/v1/events", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST events: %d %s", resp.StatusCode, b.String())
	}
	return b.String()
}

// A task of the default tenant whose ID begins with another tenant's
// name and a slash ("acme/nightly") does not take the place of that
// tenant's task ("nightly") in JetStream's duplicate window, whichever
// reports first. Before, both events went with the message ID
// "acme/nightly:1", so the second was answered duplicate and never
// stored: the default tenant could drop another tenant's reports (a
// failure included) unseen, and a tenant's could drop the default
// tenant's.
func TestBusNodeTenantsDoNotShareMessageIDs(t *testing.T) {
	t.Parallel()
	p, tokens := busNodeWithTenants(t, "msgid")
	now := time.Now().UnixMilli()
	ev := func(id string, seq int, status string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":"nightly","sequence":%d,"status":%q,"ts":%d}`, id, seq, status, now+int64(seq))
	}
	// The default tenant first, then acme; acme first, then the default
	// tenant (another sequence, so another message ID).
	steps := []struct{ tenant, id string }{{"", "acme/nightly"}, {"acme", "nightly"}, {"globex", "nightly"},
		{"acme", "nightly"}, {"", "acme/nightly"}, {"", "globex/nightly"}, {"globex", "nightly"}}
	seqs := []int{1, 1, 1, 2, 2, 1, 2}
	status := []string{"running", "running", "running", "failed", "failed", "running", "failed"}
	for i, s := range steps {
		if ans := postAs(t, p.addr, tokens[s.tenant], ev(s.id, seqs[i], status[i])); !strings.Contains(ans, `"accepted":1`) {
			t.Errorf("tenant %q, task %q, sequence %d: %s, want accepted", s.tenant, s.id, seqs[i], ans)
		}
	}
	want := map[[2]string]string{{"", "acme/nightly"}: "failed", {"", "globex/nightly"}: "running",
		{"acme", "nightly"}: "failed", {"globex", "nightly"}: "failed"}
	for k, status := range want {
		eventually(t, testwait.Timeout(t), fmt.Sprintf("tenant %q's task %q %s", k[0], k[1], status), func() bool {
			req, _ := http.NewRequest("GET", "http://"+p.addr+"/api/v1/tasks/"+strings.ReplaceAll(k[1], "/", "%2F"), nil)
			req.Header.Set("Authorization", "Bearer "+tokens[k[0]])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			return resp.StatusCode == http.StatusOK && strings.Contains(b.String(), `"status":"`+status+`"`)
		})
	}
}

// request sends method path to addr as the holder of secret and returns
// the status and the body.
func request(t *testing.T, addr, secret, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// A ping run started through one node and ended at once through another
// (a load balancer taking turns) is one run, for two tenants: the end
// pairs with the start the other node sent. Before, the second node
// asked the owners for the job's open run before the owner had applied
// the start, took the end for a run of its own, and the start stayed
// running until its timeout told of it.
func TestBusNodePingEndThroughAnotherNode(t *testing.T) {
	t.Parallel()
	start, tokens := busNodesWithTenants(t, startNATS(t).ClientURL(), 4)
	a := start("ping-a")
	b := start("ping-b")
	served := func(addr string) int {
		_, body := request(t, addr, tokens[""], "GET", "/api/v1/system")
		return strings.Count(body, `"partition":`)
	}
	eventually(t, testwait.Timeout(t), "two partitions served by each node", func() bool {
		return served(a.addr) == 2 && served(b.addr) == 2
	})
	unpaired := 0
	for i := range 300 {
		tenant := tenants[i%2]
		job := fmt.Sprintf("hop-%d", i)
		code, started := request(t, a.addr, tokens[tenant], "POST", "/ping/"+job+"/start")
		if code != http.StatusOK {
			t.Fatalf("start of %s: %d %s", job, code, started)
		}
		code, ended := request(t, b.addr, tokens[tenant], "POST", "/ping/"+job)
		if code != http.StatusOK {
			t.Fatalf("end of %s: %d %s", job, code, ended)
		}
		if started != ended {
			unpaired++
			t.Logf("tenant %s, job %s: started %q, ended %q", tenant, job, started, ended)
		}
	}
	if unpaired > 0 {
		t.Errorf("%d of 300 ends through the other node did not pair with their start", unpaired)
	}
}

// An agent with a ping key (a token limited to a job prefix) that names
// its job in a run's first event and not in the next ones, sent at once
// one request after the other, has every event applied, for two tenants.
// Before, the node asked the task's owner for its job before the owner
// had decided the first event, took the task ID for the job, answered
// the next event accepted, and the owner refused it for naming another
// job than its task's: the run's end was lost and the run stayed running.
func TestBusNodeNamelessEventRightAfterTheNamedOne(t *testing.T) {
	t.Parallel()
	var cfg strings.Builder
	cfg.WriteString("auth:\n  tokens:\n")
	keys := map[string]string{}
	for _, tenant := range tenants {
		secret, tok, err := httpapi.NewToken(tenant+"-key", httpapi.RoleAgent, tenant)
		if err != nil {
			t.Fatal(err)
		}
		keys[tenant] = secret
		fmt.Fprintf(&cfg, "    - {name: %s-key, role: agent, tenant: %q, job_prefix: backup, sha256: %x}\n", tenant, tenant, tok.Hash)
		secret, tok, err = httpapi.NewToken(tenant+"-viewer", httpapi.RoleViewer, tenant)
		if err != nil {
			t.Fatal(err)
		}
		keys[tenant+"-viewer"] = secret
		fmt.Fprintf(&cfg, "    - {name: %s-viewer, role: viewer, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	path := filepath.Join(t.TempDir(), "apollo.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startNATS(t).ClientURL()
	node := func(id string) *proc {
		return startApollo(t, "bus", "--config", path, "--nats", url, "--partitions", "4", "--node-id", id, "--listen", "127.0.0.1:0")
	}
	a, b := node("nameless-a"), node("nameless-b")
	served := func(addr string) int {
		_, body := request(t, addr, keys["acme-viewer"], "GET", "/api/v1/system")
		return strings.Count(body, `"partition":`)
	}
	eventually(t, testwait.Timeout(t), "two partitions served by each node", func() bool {
		return served(a.addr) == 2 && served(b.addr) == 2
	})
	now := time.Now().UnixMilli()
	const runs = 100
	for i := range runs {
		tenant, id := tenants[i%2], fmt.Sprintf("backup-%d", i)
		if ans := postAs(t, a.addr, keys[tenant], fmt.Sprintf(`{"taskID":%q,"name":"backup","sequence":1,"status":"running","ts":%d}`, id, now)); !strings.Contains(ans, `"accepted":1`) {
			t.Fatalf("tenant %s, run %s started: %s", tenant, id, ans)
		}
		if ans := postAs(t, b.addr, keys[tenant], fmt.Sprintf(`{"taskID":%q,"sequence":2,"status":"success","ts":%d}`, id, now+1)); !strings.Contains(ans, `"accepted":1`) {
			t.Fatalf("tenant %s, run %s ended: %s", tenant, id, ans)
		}
	}
	for i := range runs {
		tenant, id := tenants[i%2], fmt.Sprintf("backup-%d", i)
		var body string
		eventually(t, testwait.Timeout(t), "run "+id+" applied", func() bool {
			var code int
			code, body = request(t, a.addr, keys[tenant+"-viewer"], "GET", "/api/v1/tasks/"+id)
			return code == http.StatusOK && strings.Contains(body, `"sequence":2`)
		})
		if !strings.Contains(body, `"status":"success"`) {
			t.Errorf("tenant %s, run %s: %s", tenant, id, body)
		}
	}
}
