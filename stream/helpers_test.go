package stream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
)

// testTokens are the callers the test tokens stand for.
var testTokens = map[string]Caller{
	"view-a": {Name: "alice", Tenant: "a", Role: "viewer"},
	"op-a":   {Name: "oscar", Tenant: "a", Role: "operator", MayAck: true},
	"view-b": {Name: "bob", Tenant: "b", Role: "viewer"},
	"admin":  {Name: "root", Role: "admin", MayAck: true},
}

// mount serves the hub as the HTTP layer does (httpapi): it finds the
// caller of the token a test client offers (subprotocols), answers 401
// without one, and answers the error Serve returns before an upgrade.
func mount(h *Hub, tokens map[string]Caller) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := tokens[offeredToken(r)]
		if !ok {
			http.Error(w, "missing or unknown token", http.StatusUnauthorized)
			return
		}
		if err := h.Serve(w, r, who); err != nil {
			http.Error(w, err.Error(), apiclient.StatusOf(apollo.ErrorCode(err)))
		}
	})
}

// offeredToken is the token of the subprotocol "bearer.<base64url>".
func offeredToken(r *http.Request) string {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if enc, ok := strings.CutPrefix(strings.TrimSpace(p), "bearer."); ok {
				tok, _ := base64.RawURLEncoding.DecodeString(enc)
				return string(tok)
			}
		}
	}
	return ""
}

type streamEnv struct {
	t   *testing.T
	bus *bus.Bus
	hub *Hub
	srv *httptest.Server
	url string // ws://.../api/v1/stream
}

// newStreamEnv starts a bus and a hub served with test tokens.
func newStreamEnv(t *testing.T, edit func(*Options)) *streamEnv {
	t.Helper()
	return newStreamEnvListening(t, edit, nil)
}

// newStreamEnvListening is newStreamEnv with the server's listener
// wrapped by wrap (nil: as it is).
func newStreamEnvListening(t *testing.T, edit func(*Options), wrap func(net.Listener) net.Listener) *streamEnv {
	t.Helper()
	b, err := bus.New(bus.Options{Workers: 2, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	o := Options{Bus: b, Changes: busChanges(b), Logger: discardLogger}
	if edit != nil {
		edit(&o)
	}
	hub, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mount(hub, testTokens))
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	hub.Start(context.Background())
	t.Cleanup(func() { hub.Stop(context.Background()) })
	return &streamEnv{t: t, bus: b, hub: hub, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/stream"}
}

// writerGate holds the clients' writers when they wake (Options.testDrain)
// between hold and release, so that messages queue behind them.
type writerGate struct{ g atomic.Pointer[chan struct{}] }

// install makes o's writers wait at the gate, and releases them when the
// test ends: a failed test must not leave a writer held.
func (w *writerGate) install(t *testing.T, o *Options) {
	o.testDrain = func() {
		if g := w.g.Load(); g != nil {
			<-*g
		}
	}
	t.Cleanup(w.release)
}

func (w *writerGate) hold() {
	g := make(chan struct{})
	w.g.Store(&g)
}

func (w *writerGate) release() {
	if held := w.g.Swap(nil); held != nil {
		close(*held)
	}
}

// busChanges subscribes to a bus's changes, as cmd/apollo does.
func busChanges(b *bus.Bus) func(int) ChangeSubscription {
	return func(n int) ChangeSubscription { return b.Subscribe(n) }
}

var discardLogger = slog.New(slog.DiscardHandler)

func subprotocols(token string) []string {
	return []string{streamProtocol, "bearer." + base64.RawURLEncoding.EncodeToString([]byte(token))}
}

// wsClient is a test client that reads messages with a deadline
// (testwait.Timeout: a message the test waits for may take long on a
// loaded machine, never forever).
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func (e *streamEnv) dial(token string) *wsClient {
	e.t.Helper()
	conn, resp, err := websocket.Dial(testwait.Context(e.t), e.url, &websocket.DialOptions{Subprotocols: subprotocols(token)})
	if err != nil {
		e.t.Fatalf("dial: %v (%v)", err, resp)
	}
	conn.SetReadLimit(64 << 20)
	e.t.Cleanup(func() { conn.CloseNow() })
	c := &wsClient{t: e.t, conn: conn}
	if m := c.read(); m.Type != apiclient.MsgHello {
		e.t.Fatalf("first message %q, want hello", m.Type)
	}
	return c
}

// wireMsg is every server message, decoded loosely.
type wireMsg struct {
	Type        string              `json:"type"`
	Cursor      string              `json:"cursor"`
	Reason      string              `json:"reason"`
	Resumed     bool                `json:"resumed"`
	Tasks       []apollo.Task       `json:"tasks"`
	Alert       json.RawMessage     `json:"alert"`
	OK          bool                `json:"ok"`
	Error       string              `json:"error"`
	Message     string              `json:"message"`
	Field       string              `json:"field"`
	Ts          int64               `json:"ts"`
	Stats       json.RawMessage     `json:"stats"`
	Summaries   json.RawMessage     `json:"summaries"`
	HeartbeatMs int64               `json:"heartbeatMs"`
	Principal   apiclient.Principal `json:"principal"`
}

func (c *wsClient) read() wireMsg {
	c.t.Helper()
	m, err := c.tryRead(testwait.Timeout(c.t))
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

func (c *wsClient) tryRead(d time.Duration) (wireMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, data, err := c.conn.Read(ctx)
	if err != nil {
		return wireMsg{}, err
	}
	var m wireMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return wireMsg{}, fmt.Errorf("decoding %s: %w", data, err)
	}
	return m, nil
}

// readType reads until a message of type typ, skipping heartbeats.
func (c *wsClient) readType(typ string) wireMsg {
	c.t.Helper()
	for {
		m := c.read()
		if m.Type == typ {
			return m
		}
		if m.Type != apiclient.MsgHeartbeat {
			c.t.Fatalf("got %s (%+v), want %s", m.Type, m, typ)
		}
	}
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	data, _ := json.Marshal(v)
	if err := c.conn.Write(context.Background(), websocket.MessageText, data); err != nil {
		c.t.Fatal(err)
	}
}

type sub map[string]any

func (c *wsClient) subscribe(s sub) wireMsg {
	c.t.Helper()
	c.send(map[string]any(s))
	m := c.read()
	if m.Type != apiclient.MsgSnapshot && m.Type != apiclient.MsgTasks {
		c.t.Fatalf("answer to subscribe: %+v", m)
	}
	return m
}

// subscribeQuiet subscribes without tasks (no snapshot answers it), then
// waits for the answer to an ack sent after it: the hub handles a
// client's messages in order, so the subscription is registered before
// the test publishes anything it must receive.
func (c *wsClient) subscribeQuiet(s sub) {
	c.t.Helper()
	c.send(map[string]any(s))
	c.roundTrip()
}

// roundTrip sends an ack and reads until its answer, skipping
// heartbeats: the hub has handled every message the client sent before.
func (c *wsClient) roundTrip() {
	c.t.Helper()
	c.send(sub{"type": "ack", "alert": "x"})
	c.readType(apiclient.MsgAckResult)
}

// publish reports events to the bus; each must be accepted.
func (e *streamEnv) publish(evs ...apollo.Event) {
	e.t.Helper()
	outs := make([]bus.Outcome, len(evs))
	if err := e.bus.Publish(context.Background(), evs, outs); err != nil {
		e.t.Fatal(err)
	}
	for i, o := range outs {
		if o.Result != bus.Accepted {
			e.t.Fatalf("event %d %+v: %v %v", i, evs[i], o.Result, o.Err)
		}
	}
}

func ev(tenant, id, name string, seq int64, st apollo.Status) apollo.Event {
	return apollo.Event{Tenant: tenant, TaskID: id, Name: name, Sequence: seq, Status: st, Ts: 1_700_000_000_000 + seq}
}

// waitCursor waits until the hub has dispatched n changes.
func (e *streamEnv) waitCursor(n uint64) {
	e.t.Helper()
	deadline := time.After(testwait.Timeout(e.t))
	for {
		ch := e.hub.progress.Next()
		e.hub.mu.Lock()
		cur := e.hub.cursor
		e.hub.mu.Unlock()
		if cur >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("hub at cursor %d, want %d", cur, n)
		}
	}
}

// latest folds task updates as a client must: a task replaces the one held
// unless that one is newer (sequence, then updatedAt).
func latest(into map[string]apollo.Task, tasks []apollo.Task) {
	for _, t := range tasks {
		old, ok := into[t.TaskID]
		if ok && (old.Sequence > t.Sequence || old.Sequence == t.Sequence && old.UpdatedAt > t.UpdatedAt) {
			continue
		}
		into[t.TaskID] = t
	}
}

func jsonDecode(resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
