package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
)

// The hub's own behaviour is tested in package stream; these tests are of
// its mount: the route's authentication, and GET /api/v1/system reading
// the stream's figures live.

// tokenAuth maps tokens to principals, read with BearerToken as a real
// authenticator would.
type tokenAuth map[string]*Principal

func (a tokenAuth) Authenticate(r *http.Request) (*Principal, error) {
	tok, ok := BearerToken(r)
	if p := a[tok]; ok && p != nil {
		return p, nil
	}
	return nil, &apollo.Error{Code: apollo.EUNAUTHORIZED, Message: "missing or unknown token"}
}

var testTokens = tokenAuth{
	"view-a": {Name: "alice", Tenant: "a", Role: RoleViewer},
	"op-a":   {Name: "oscar", Tenant: "a", Role: RoleOperator},
	"view-b": {Name: "bob", Tenant: "b", Role: RoleViewer},
	"admin":  {Name: "root", Role: RoleAdmin},
}

// newHub starts a hub over b's changes, stopped at the end of the test.
func newHub(t testing.TB, b *bus.Bus, clock apollo.Clock) *stream.Hub {
	t.Helper()
	hub, err := stream.New(stream.Options{Bus: b, Changes: func(n int) stream.ChangeSubscription { return b.Subscribe(n) },
		Clock: clock, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hub.Stop(context.Background()) })
	return hub
}

// streamEnv is a bus, a hub and the API serving it with testTokens, with
// the two in GET /api/v1/system as cmd/apollo lists them.
type streamEnv struct {
	bus *bus.Bus
	hub *stream.Hub
	srv *httptest.Server
}

func newStreamEnv(t *testing.T) *streamEnv {
	t.Helper()
	b, err := bus.New(bus.Options{Workers: 2, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	hub := newHub(t, b, nil)
	parts := selfmetrics.Parts{selfmetrics.Watch("bus", b.Stats), selfmetrics.Watch("stream", hub.Stats)}
	srv := httptest.NewServer(New(Options{Bus: b, Auth: testTokens, Stream: hub, System: parts.System()}))
	t.Cleanup(srv.Close)
	return &streamEnv{bus: b, hub: hub, srv: srv}
}

// dialStream opens the stream of the server at base as token and reads
// its hello.
func dialStream(t *testing.T, base, token string) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.Dial(testwait.Context(t), "ws"+strings.TrimPrefix(base, "http")+"/api/v1/stream",
		&websocket.DialOptions{Subprotocols: subprotocols(token)})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { conn.CloseNow() })
	_, data, err := conn.Read(testwait.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Type string }
	if err := json.Unmarshal(data, &m); err != nil || m.Type != apiclient.MsgHello {
		t.Fatalf("first message %s, want hello", data)
	}
	return conn
}

func subprotocols(token string) []string {
	return []string{apiclient.StreamProtocol, "bearer." + base64.RawURLEncoding.EncodeToString([]byte(token))}
}

func jsonDecode(resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func TestStreamNeedsToken(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/api/v1/stream"
	for _, protos := range [][]string{nil, {apiclient.StreamProtocol, "bearer.bm9wZQ"}, {apiclient.StreamProtocol, "bearer.!!"}} {
		_, resp, err := websocket.Dial(testwait.Context(t), url, &websocket.DialOptions{Subprotocols: protos})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("protocols %v: %v %v", protos, err, resp)
		}
	}
}

func TestSystemEndpoint(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	dialStream(t, e.srv.URL, "view-a")
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/system", nil)
	req.Header.Set("Authorization", "Bearer view-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Bus    map[string]any `json:"bus"`
		Stream stream.Stats   `json:"stream"`
	}
	if err := jsonDecode(resp, &body); err != nil || body.Bus == nil || body.Stream.Clients != 1 {
		t.Errorf("system: %v %+v", err, body)
	}
}
