package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// busNodeWithTenants starts a scale-out node of two partitions on its
// own NATS server, with an agent of the default tenant and an admin of
// each of tenants (tokens returned by tenant), and waits until it serves
// both partitions.
func busNodeWithTenants(t *testing.T, id string) (*proc, map[string]string) {
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
	p := startApollo(t, "bus", "--config", path, "--nats", startNATS(t).ClientURL(), "--partitions", "2",
		"--node-id", id, "--listen", "127.0.0.1:0")
	servedWhenReady(t, p.addr)
	return p, tokens
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
