package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// figureTokens adds a token for each of who ("name role tenant") to cfg and
// returns the secrets by name.
func figureTokens(t *testing.T, cfg *config.Config, who ...string) map[string]string {
	t.Helper()
	secrets := map[string]string{}
	for _, w := range who {
		f := strings.Fields(w + " ")
		name, roleName, tenant := f[0], f[1], ""
		if len(f) > 2 {
			tenant = f[2]
		}
		role, err := httpapi.ParseRole(roleName)
		if err != nil {
			t.Fatal(err)
		}
		secret, tok, err := httpapi.NewToken(name, role, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: name, Role: roleName, Tenant: tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	return secrets
}

// streamSystem opens the stream with token and returns its first system
// message.
func streamSystem(t *testing.T, addr, token string) string {
	t.Helper()
	ctx := testwait.Context(t)
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/api/v1/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		t.Fatalf("dial the stream: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","filter":{"types":["system"]}}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the system message: %v", err)
		}
		if strings.Contains(string(data), `"type":"system"`) {
			return string(data)
		}
	}
}

// A viewer of tenant team-a read /metrics, GET /api/v1/system and the
// stream's system message, and found there the name of tenant team-b's
// pager channel and how many of its messages failed. What a tenant's
// token sees of the server's figures is now the counts of every tenant
// (they name nothing) and, of the channels, those that serve its tenant;
// the default tenant's tokens are the operators' and see every channel.
func TestServerFiguresShowATenantOnlyItsChannels(t *testing.T) {
	t.Parallel()
	const bName, bSecret = "b-pager-7f3k", "SECRETPATH-b"
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such hook "+bSecret, http.StatusBadGateway)
	}))
	t.Cleanup(failing.Close)
	aHook, shared := newHook(t), newHook(t)
	cfg := testConfig(t)
	cfg.Channels = map[string]map[string]any{
		bName:    {"type": "webhook", "url": failing.URL + "/" + bSecret, "tenants": []any{"team-b"}},
		"a-hook": {"type": "webhook", "url": aHook.srv.URL, "tenants": []any{"team-a"}},
		"shared": {"type": "webhook", "url": shared.srv.URL, "tenants": []any{"*"}},
	}
	secrets := figureTokens(t, &cfg, "a-viewer viewer team-a", "a-operator operator team-a",
		"b-operator operator team-b", "ops-viewer viewer")
	addr, _, _ := inProcess(t, cfg)

	// team-b's channel fails once, team-a's is sent once.
	if st, body := apiCall(t, addr, secrets["b-operator"], "POST", "/api/v1/channels/"+bName+"/test", ""); st != http.StatusOK || !strings.Contains(string(body), `"outcome":"failed"`) {
		t.Fatalf("team-b tests its channel: %d %s", st, body)
	}
	if st, body := apiCall(t, addr, secrets["a-operator"], "POST", "/api/v1/channels/a-hook/test", ""); st != http.StatusOK {
		t.Fatalf("team-a tests its channel: %d %s", st, body)
	}

	get := func(who, path string) string {
		t.Helper()
		st, body := apiCall(t, addr, secrets[who], "GET", path, "")
		if st != http.StatusOK {
			t.Fatalf("%s GET %s: %d %s", who, path, st, body)
		}
		return string(body)
	}
	answers := map[string]string{
		"/metrics":              get("a-viewer", "/metrics"),
		"/api/v1/system":        get("a-viewer", "/api/v1/system"),
		"the stream's system":   streamSystem(t, addr, secrets["a-viewer"]),
		"/api/v1/notifications": get("a-viewer", "/api/v1/notifications?channel="+bName),
	}
	// The channel test echoes the name asked for, and lists only the
	// tenant's channels.
	st, body := apiCall(t, addr, secrets["a-operator"], "POST", "/api/v1/channels/"+bName+"/test", "")
	if st != http.StatusNotFound || !strings.Contains(string(body), `"the channels of this tenant: a-hook, shared"`) || strings.Contains(string(body), bSecret) {
		t.Errorf("team-a tests team-b's channel: %d %s, want 404 listing a-hook and shared", st, body)
	}
	for what, body := range answers {
		if strings.Contains(body, bName) || strings.Contains(body, bSecret) {
			t.Errorf("team-a's viewer learns team-b's channel from %s:\n%s", what, grepLines(body, "b-pager"))
		}
	}
	// Not by showing nothing: team-a sees its own channel and the shared one.
	if s := answers["/metrics"]; !strings.Contains(s, `apollo_notifications_total{channel="a-hook",outcome="sent"} 1`) ||
		!strings.Contains(s, `apollo_notifications_queued_total{channel="shared"}`) ||
		!strings.Contains(s, "apollo_events_total") {
		t.Errorf("team-a's /metrics lacks its own figures:\n%s", grepLines(s, "apollo_notifications"))
	}
	for _, what := range []string{"/api/v1/system", "the stream's system"} {
		if s := answers[what]; !strings.Contains(s, `"a-hook":{`) || !strings.Contains(s, `"shared":{`) || !strings.Contains(s, `"bus":{`) {
			t.Errorf("team-a's %s lacks its own figures:\n%s", what, s)
		}
	}

	// The operators (the default tenant) see every channel, team-b's failure too.
	if s := get("ops-viewer", "/metrics"); !strings.Contains(s, `apollo_notifications_total{channel="`+bName+`",outcome="failed"} 1`) {
		t.Errorf("the default tenant's /metrics lacks team-b's channel:\n%s", grepLines(s, "apollo_notifications_total"))
	}
	for what, s := range map[string]string{"/api/v1/system": get("ops-viewer", "/api/v1/system"), "the stream's system": streamSystem(t, addr, secrets["ops-viewer"])} {
		if !strings.Contains(s, `"`+bName+`":{`) {
			t.Errorf("the default tenant's %s lacks team-b's channel:\n%s", what, s)
		}
	}
}

// In the three-process mode the bus shows the alert processes' delivery
// counters, per channel, under components in GET /api/v1/system: a
// tenant's viewer saw every tenant's channels there too.
func TestBusShowsATenantOnlyItsChannelsOfTheAlertProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	const bName = "b-pager-7f3k"
	cfg := testConfig(t)
	cfg.Channels = map[string]map[string]any{
		bName:    {"type": "webhook", "url": newHook(t).srv.URL, "tenants": []any{"team-b"}},
		"a-hook": {"type": "webhook", "url": newHook(t).srv.URL, "tenants": []any{"team-a"}},
	}
	secrets := figureTokens(t, &cfg, "a-viewer viewer team-a", "ops-viewer viewer")
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
	get := func(who string) string {
		t.Helper()
		st, body := apiCall(t, bus.addr, secrets[who], "GET", "/api/v1/system", "")
		if st != http.StatusOK {
			t.Fatalf("%s GET /api/v1/system: %d %s", who, st, body)
		}
		return string(body)
	}
	eventually(t, 30*time.Second, "the alert process's counters on the bus", func() bool {
		return strings.Contains(get("ops-viewer"), `"`+bName+`":{`)
	})
	if s := get("a-viewer"); strings.Contains(s, bName) || !strings.Contains(s, `"a-hook":{`) {
		t.Errorf("team-a's viewer, on the bus: want a-hook and not %s:\n%s", bName, s)
	}
}
