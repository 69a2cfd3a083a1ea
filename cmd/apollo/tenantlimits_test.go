package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// Issue 16.8, through the server: with a ceiling of 10 tasks and 5 for
// each tenant (from apollo.yaml), tenant B filling its share does not
// refuse tenant A, whose own limit is 3; after a restart the counts hold.
func TestTaskLimitsPerTenantThroughTheServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yml := filepath.Join(dir, "apollo.yaml")
	if err := os.WriteFile(yml, []byte("limits:\n  tasks: 10\n  tenant_tasks: 5\n  tenants:\n    a: {tasks: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(yml, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data, cfg.Listen = filepath.Join(dir, "data"), "127.0.0.1:0"
	secrets := map[string]string{}
	for _, tenant := range []string{"a", "b"} {
		secret, tok, err := httpapi.NewToken("agent-"+tenant, httpapi.RoleAgent, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: "agent-" + tenant, Role: "agent", Tenant: tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	// create reports n new runs for a tenant and returns the per-event results.
	create := func(addr, tenant, prefix string, n int) []string {
		t.Helper()
		var evs []string
		for i := range n {
			evs = append(evs, fmt.Sprintf(`{"taskID":"%s-%d","sequence":1,"status":"running","ts":%d}`, prefix, i, time.Now().UnixMilli()))
		}
		_, rs := ingest(t, addr, secrets[tenant], "["+strings.Join(evs, ",")+"]")
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.Result
		}
		return out
	}
	count := func(rs []string, want string) (n int) {
		for _, r := range rs {
			if r == want {
				n++
			}
		}
		return n
	}

	addr, _, stop := inProcess(t, cfg)
	if rs := create(addr, "b", "flood", 8); count(rs, "accepted") != 5 || count(rs, "retry_later") != 3 {
		t.Fatalf("tenant b over its share: %v", rs)
	}
	if rs := create(addr, "a", "run", 4); count(rs, "accepted") != 3 || count(rs, "retry_later") != 1 {
		t.Fatalf("tenant a, with its own limit of 3, after b filled its share: %v", rs)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	addr, _, _ = inProcess(t, cfg)
	if rs := create(addr, "b", "again", 1); count(rs, "retry_later") != 1 {
		t.Errorf("tenant b after a restart: %v, want its limit to hold", rs)
	}
	if rs := create(addr, "a", "again", 1); count(rs, "retry_later") != 1 {
		t.Errorf("tenant a after a restart: %v, want its limit to hold", rs)
	}
}
