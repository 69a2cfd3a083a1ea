package stream

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// tryDial opens a stream as token's caller and returns the connection, or
// the answer that refused it.
func (e *streamEnv) tryDial(token string) (*websocket.Conn, int, string) {
	e.t.Helper()
	conn, resp, err := websocket.Dial(testwait.Context(e.t), e.url, &websocket.DialOptions{Subprotocols: subprotocols(token)})
	if err == nil {
		e.t.Cleanup(func() { conn.CloseNow() })
		return conn, http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		e.t.Fatalf("dial: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, string(body)
}

// One tenant's viewer cannot open streams without end: each costs the
// server a file descriptor, three goroutines and about 50 KB, and a viewer
// that held 20 000 once left the server unable to accept any request of
// any tenant (accept4: too many open files). Past its tenant's limit, or
// the server's, a connection is refused before the upgrade with 429 and
// counted; the other tenant still connects, and a closed stream frees its
// place.
func TestStreamClientLimits(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, func(o *Options) { o.MaxClients, o.TenantClients = 3, 2 })

	var held []*wsClient
	for range 2 {
		held = append(held, e.dial("view-b"))
	}
	_, st, body := e.tryDial("view-b")
	if st != http.StatusTooManyRequests || !strings.Contains(body, `tenant "b" has 2 streams open, its limit`) {
		t.Fatalf("a third stream of tenant b: %d %q, want 429 naming the tenant's limit", st, body)
	}
	a := e.dial("view-a") // the other tenant is not concerned
	a.subscribe(sub{"type": "subscribe"})
	_, st, body = e.tryDial("view-a")
	if st != http.StatusTooManyRequests || !strings.Contains(body, "the server has 3 streams open, its limit") {
		t.Fatalf("a fourth stream on the server: %d %q, want 429 naming the server's limit", st, body)
	}
	if s := e.hub.Stats(); s.OverLimit != 2 || s.Accepted != 3 {
		t.Errorf("stats %+v: want 2 over the limit, 3 accepted", s)
	}

	// A stream that ends gives its place back.
	held[0].conn.Close(websocket.StatusNormalClosure, "")
	deadline := testwait.Context(t)
	for {
		next := e.hub.progress.Next()
		conn, st, _ := e.tryDial("view-b")
		if conn != nil {
			c := &wsClient{t: t, conn: conn}
			if m := c.read(); m.Type != "hello" {
				t.Fatalf("first message %q", m.Type)
			}
			break
		}
		if st != http.StatusTooManyRequests {
			t.Fatalf("dial after a close: %d", st)
		}
		select {
		case <-deadline.Done():
			t.Fatal("the closed stream's place was never given back")
		case <-next:
		}
	}
}

// The limits are checked like every other option.
func TestStreamClientLimitOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{{MaxClients: -1}, {TenantClients: -1}} {
		o.Bus, o.Changes = &bus0{}, func(int) ChangeSubscription { return nil }
		if _, err := New(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

type bus0 struct{}

func (bus0) List(apollo.TaskFilter) ([]apollo.Task, string, error) { return nil, "", nil }

// A request for the stream's address without the upgrade (a browser
// whose WebSocket failed asks it to learn why) gets the answer a
// WebSocket would get, and is not counted as a connection: each refused
// dashboard showed as two streams over the limit.
func TestProbeIsNotAConnection(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, func(o *Options) { o.TenantClients = 1 })
	probe := func() (int, string) {
		req, _ := http.NewRequestWithContext(testwait.Context(t), "GET", e.srv.URL+"/api/v1/stream", nil)
		req.Header.Set("Sec-WebSocket-Protocol", strings.Join(subprotocols("view-b"), ", "))
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if st, body := probe(); st != http.StatusUpgradeRequired {
		t.Fatalf("probe with nothing in the way: %d %q, want 426", st, body)
	}
	e.dial("view-b")
	if _, st, _ := e.tryDial("view-b"); st != http.StatusTooManyRequests {
		t.Fatalf("a second stream of tenant b: %d, want 429", st)
	}
	if st, body := probe(); st != http.StatusTooManyRequests || !strings.Contains(body, `tenant "b" has 1 streams open, its limit`) {
		t.Fatalf("probe over the limit: %d %q, want 429 with the reason", st, body)
	}
	if s := e.hub.Stats(); s.OverLimit != 1 || s.Refused != 0 || s.Accepted != 1 {
		t.Errorf("stats %+v: want 1 accepted, 1 over the limit, none refused: the probes are not connections", s)
	}
}
