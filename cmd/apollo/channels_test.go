package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/notify/notifytest"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// tenantChannels is the configuration of the channel tests: a webhook
// channel of the default tenant (ops), one of team-a's (a-hook) and a
// shared one, and an admin token for each of team-a and team-b.
func tenantChannels(t *testing.T) (cfg config.Config, hooks map[string]*hook, secrets map[string]string) {
	hooks = map[string]*hook{"ops": newHook(t), "a-hook": newHook(t), "shared": newHook(t)}
	cfg = testConfig(t)
	cfg.Channels = map[string]map[string]any{
		"ops":    {"type": "webhook", "url": hooks["ops"].srv.URL}, // the default tenant's
		"a-hook": {"type": "webhook", "url": hooks["a-hook"].srv.URL, "tenants": []any{"team-a"}},
		"shared": {"type": "webhook", "url": hooks["shared"].srv.URL, "tenants": []any{"*"}},
	}
	secrets = map[string]string{}
	for _, tenant := range []string{"team-a", "team-b"} {
		secret, tok, err := httpapi.NewToken(tenant+"-admin", httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: tenant + "-admin", Role: "admin", Tenant: tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	return cfg, hooks, secrets
}

// Channels belong to tenants, end to end: a tenant's admin may name in
// PUT /api/v1/rules only its own channels and shared ones; a job name and
// run ID built to forge a link or a mention reach the shared channel
// inert, with the tenant named; and the same rule of two tenants notifies
// each through its own channel, the other's never.
func TestChannelsBelongToTenants(t *testing.T) {
	t.Parallel()
	cfg, hooks, secrets := tenantChannels(t)
	addr, _, _ := inProcess(t, cfg)
	checkTenantChannels(t, addr, hooks, secrets, true)
}

// The same with the three processes: the alert process checks the rules
// the bus's API hands it against the tenant's channels.
func TestChannelsBelongToTenantsThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	cfg, hooks, secrets := tenantChannels(t)
	_, prefix := redistest.Client(t)
	cfg.Redis.URL, cfg.Redis.Prefix = redisURL(t), prefix
	cfg.Alert.Heartbeat = config.Duration(time.Second)
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(cfg.Data, "apollo.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bus := startApollo(t, "bus", "--config", file, "--data", filepath.Join(cfg.Data, "bus"))
	startProc(t, "apollo alert ", "alert", "--config", file)
	checkTenantChannels(t, bus.addr, hooks, secrets, false)
}

// checkTenantChannels runs the channel checks against the API at addr;
// attempts says whether it records deliveries (the alert processes keep
// theirs).
func checkTenantChannels(t *testing.T, addr string, hooks map[string]*hook, secrets map[string]string, attempts bool) {
	t.Helper()
	call := func(tenant, method, path, contentType, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[tenant])
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	rule := func(channel string) string {
		return fmt.Sprintf(`RULE job_failed task_prefix: "" ON: failed LABELS: runbook=%q NOTIFY: %s`, notifytest.RunbookURL, channel)
	}
	for _, tc := range []struct {
		tenant, channel string
		code            int
	}{
		{"team-b", "ops", 400},    // the default tenant's
		{"team-b", "a-hook", 400}, // team-a's
		{"team-b", "shared", 200},
		{"team-a", "a-hook", 200},
	} {
		code, body := call(tc.tenant, "PUT", "/api/v1/rules", "text/plain", rule(tc.channel))
		if code != tc.code || (code == 400 && !strings.Contains(body, `unknown channel \"`+tc.channel+`\"`)) {
			t.Fatalf("%s naming %s: %d %s", tc.tenant, tc.channel, code, body)
		}
	}
	// One failed run for each tenant, of a job with the same hostile name.
	for _, tenant := range []string{"team-a", "team-b"} {
		events, _ := json.Marshal([]map[string]any{
			{"taskID": "run-" + tenant + " [click](http://evil.example/x) <!channel> @all", "name": notifytest.HostileJob,
				"sequence": 1, "status": "running", "ts": time.Now().UnixMilli()},
			{"taskID": "run-" + tenant + " [click](http://evil.example/x) <!channel> @all",
				"sequence": 2, "status": "failed", "ts": time.Now().UnixMilli()},
		})
		if code, body := call(tenant, "POST", "/api/v1/events", "application/json", string(events)); code != 200 {
			t.Fatalf("%s events: %d %s", tenant, code, body)
		}
	}
	for channel, tenant := range map[string]string{"a-hook": "team-a", "shared": "team-b"} {
		p := hooks[channel].await(t, 30*time.Second, channel, func(webhook.ApolloPayload) bool { return true })
		if p.Alert.Tenant != tenant || !strings.HasPrefix(p.Title, "["+tenant+"] ") {
			t.Fatalf("%s got tenant %q: %s", channel, p.Alert.Tenant, p.Title)
		}
		notifytest.CheckInert(t, tenant, p.Title, p.Text)
	}
	// Each tenant's record shows its one message, sent through its channel.
	recorded := map[string]string{"team-a": "a-hook", "team-b": "shared"}
	if !attempts {
		recorded = nil // the alert processes keep the record
	}
	for tenant, want := range recorded {
		var body string
		eventually(t, 10*time.Second, tenant+"'s attempt recorded", func() bool {
			_, body = call(tenant, "GET", "/api/v1/notifications", "", "")
			return strings.Contains(body, `"outcome":"sent"`)
		})
		var list struct {
			Attempts []struct{ Channel, Outcome string }
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Attempts) != 1 || list.Attempts[0].Channel != want {
			t.Errorf("%s's attempts: %s", tenant, body)
		}
	}
	// Nothing else arrived: not the other tenant's, not on the default
	// tenant's channel.
	for name, h := range hooks {
		select {
		case p := <-h.C:
			t.Errorf("%s got a second notification: tenant %q %s", name, p.Alert.Tenant, p.Title)
		default:
		}
	}
}
