package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// A token limited to a job prefix reads nothing of the other jobs: an
// event it sends for a task of another job is refused without the other
// job's name. The refusal said `task "t-1" belongs to job "payroll_eu",
// not "backup_db"`, so a ping key (the token that travels in URLs) could
// learn the names of the tenant's other jobs by trying task IDs.
func TestPrefixTokenLearnsNoOtherJobsName(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	secrets := map[string]string{}
	for _, tc := range []struct{ key, tenant, role, prefix string }{
		{"ops/a", "a", "admin", ""}, {"ping/a", "a", "agent", "backup"},
		{"ops/b", "b", "admin", ""}, {"ping/b", "b", "agent", "backup"},
	} {
		role, _ := httpapi.ParseRole(tc.role)
		secret, tok, err := httpapi.NewToken(tc.key, role, tc.tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tc.key] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: tc.key, Role: tc.role, Tenant: tc.tenant, JobPrefix: tc.prefix, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	addr, _, _ := inProcess(t, cfg)
	post := func(key, body string) string {
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[key])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, tenant := range []string{"a", "b"} {
		secret := "payroll_" + tenant
		if body := post("ops/"+tenant, `{"taskID":"t-1","name":"`+secret+`","sequence":1,"status":"running","ts":1764400000000}`); !strings.Contains(body, `"accepted":1`) {
			t.Fatalf("tenant %s, the admin's run: %s", tenant, body)
		}
		body := post("ping/"+tenant, `[{"taskID":"t-1","name":"backup_db","sequence":2,"status":"success","ts":1764400000001},`+
			`{"taskID":"t-1","name":"backup_db","sequence":9,"status":"failed","ts":1764400000001}]`)
		if !strings.Contains(body, `"rejected":2`) || !strings.Contains(body, `"code":"conflict"`) {
			t.Errorf("tenant %s, the ping key's events for another job's task: %s, want both rejected as a conflict", tenant, body)
		}
		if strings.Contains(body, secret) {
			t.Errorf("tenant %s, the ping key's answer names the other job: %s", tenant, body)
		}
	}
	// The admin, who may report every job, still hears whose task it is.
	if body := post("ops/a", `{"taskID":"t-1","name":"other","sequence":3,"status":"success","ts":1764400000002}`); !strings.Contains(body, `task \"t-1\" belongs to job \"payroll_a\", not \"other\"`) {
		t.Errorf("the admin's conflict: %s", body)
	}
}
