package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A viewer of one tenant opened 20 000 streams on a server it shares with
// another tenant: the process ran out of file descriptors ("accept4: too
// many open files") and refused every request, the other tenant's events
// included. With the default limits a tenant holds at most 1 000 streams:
// the next is answered 429 with the reason, the other tenant still opens
// its stream and reports, and the refusal is counted on /metrics.
func TestStreamsPerTenantAreBounded(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	secrets := map[string]string{}
	for _, who := range []struct{ name, role, tenant string }{
		{"view-a", "viewer", "acme"}, {"agent-a", "agent", "acme"}, {"view-b", "viewer", "globex"},
	} {
		role, err := httpapi.ParseRole(who.role)
		if err != nil {
			t.Fatal(err)
		}
		secret, tok, err := httpapi.NewToken(who.name, role, who.tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[who.name] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: who.name, Role: who.role, Tenant: who.tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	addr, _, _ := inProcess(t, cfg)
	ctx := testwait.Context(t)
	dial := func(token string) (*websocket.Conn, int, string) {
		t.Helper()
		c, resp, err := websocket.Dial(ctx, "ws://"+addr+"/api/v1/stream", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{apiclient.StreamProtocol}})
		if err != nil {
			if resp == nil {
				t.Fatalf("dial: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			return nil, resp.StatusCode, string(body)
		}
		t.Cleanup(func() { c.CloseNow() })
		if _, data, err := c.Read(ctx); err != nil || !strings.Contains(string(data), `"type":"hello"`) {
			t.Fatalf("first message: %s %v", data, err)
		}
		return c, http.StatusSwitchingProtocols, ""
	}

	limit := config.Default().Limits.TenantStreamClients
	for i := range limit {
		if _, st, body := dial(secrets["view-b"]); st != http.StatusSwitchingProtocols {
			t.Fatalf("stream %d of tenant globex: %d %s", i+1, st, body)
		}
	}
	if _, st, body := dial(secrets["view-b"]); st != http.StatusTooManyRequests ||
		!strings.Contains(body, fmt.Sprintf(`tenant \"globex\" has %d streams open, its limit`, limit)) {
		t.Fatalf("stream %d of tenant globex: %d %s, want 429 naming the tenant's limit", limit+1, st, body)
	}

	// The other tenant opens its stream, reports, and sees its run.
	a, st, body := dial(secrets["view-a"])
	if st != http.StatusSwitchingProtocols {
		t.Fatalf("tenant acme's stream: %d %s", st, body)
	}
	if err := a.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","filter":{"types":["tasks"]},"coalesce":false}`)); err != nil {
		t.Fatal(err)
	}
	if _, data, err := a.Read(ctx); err != nil || !strings.Contains(string(data), `"type":"snapshot"`) {
		t.Fatalf("tenant acme's snapshot: %s %v", data, err)
	}
	if st, _ := ingest(t, addr, secrets["agent-a"], `{"taskID":"acme-1","name":"etl","sequence":1,"status":"running","ts":`+fmt.Sprint(time.Now().UnixMilli())+`}`); st != http.StatusOK {
		t.Fatalf("tenant acme's event: %d", st)
	}
	if _, data, err := a.Read(ctx); err != nil || !strings.Contains(string(data), `"taskID":"acme-1"`) {
		t.Fatalf("tenant acme's change on its stream: %s %v", data, err)
	}

	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+secrets["view-a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	scrape, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(scrape), `apollo_stream_connections_total{result="over_limit"} 1`+"\n") {
		t.Errorf("the refusal is not counted on /metrics:\n%s", grepLines(string(scrape), "apollo_stream_connections_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			b.WriteString(line)
		}
	}
	return b.String()
}
