package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// streamGate stands between the dashboard and a real server: it passes
// the REST requests on, relays the stream both ways, and while hold is
// set keeps the server's messages, in order, instead of handing them to
// the dashboard: messages on their way.
type streamGate struct {
	t     *testing.T
	srv   *httptest.Server
	up    string // the server's stream address
	opens atomic.Int64
	held  chan struct{} // a token after each message held or passed

	mu     sync.Mutex
	hold   bool
	queue  []heldMsg
	passed map[string]int  // the messages passed on, by type
	client *websocket.Conn // the dashboard's end of the newest stream
	cut    bool            // the newest stream was cut: nothing more passes
}

type heldMsg struct {
	typ  string
	data []byte
}

func newStreamGate(t *testing.T, server string) *streamGate {
	target, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	g := &streamGate{t: t, up: "ws" + strings.TrimPrefix(server, "http") + "/api/v1/stream", held: make(chan struct{}, 1), passed: map[string]int{}}
	rest := httputil.NewSingleHostReverseProxy(target)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/stream" {
			g.relay(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *streamGate) relay(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up, _, err := websocket.Dial(ctx, g.up, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": r.Header.Values("Authorization")}, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	up.SetReadLimit(-1)
	down, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		return
	}
	defer down.CloseNow()
	g.mu.Lock()
	g.client, g.cut = down, false
	g.mu.Unlock()
	g.opens.Add(1)
	go func() { // the dashboard's messages go up as they come
		defer cancel()
		for {
			typ, data, err := down.Read(ctx)
			if err != nil || up.Write(ctx, typ, data) != nil {
				return
			}
		}
	}()
	for {
		_, data, err := up.Read(ctx)
		if err != nil {
			return
		}
		var m struct{ Type string }
		_ = json.Unmarshal(data, &m)
		g.mu.Lock()
		switch {
		case g.client != down || g.cut:
		case g.hold:
			g.queue = append(g.queue, heldMsg{m.Type, data})
		default:
			err = down.Write(ctx, websocket.MessageText, data)
			g.passed[m.Type]++
		}
		g.mu.Unlock()
		select {
		case g.held <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// holdMessages keeps the server's messages from now on.
func (g *streamGate) holdMessages() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = true
}

// untilHeld waits until a message of type typ is held.
func (g *streamGate) untilHeld(typ string) {
	g.t.Helper()
	g.until("a "+typ+" message held", func() bool {
		for _, m := range g.queue {
			if m.typ == typ {
				return true
			}
		}
		return false
	})
}

// untilPassed waits until n messages of type typ have been passed on.
func (g *streamGate) untilPassed(typ string, n int) {
	g.t.Helper()
	g.until(fmt.Sprintf("%d %s messages passed on", n, typ), func() bool { return g.passed[typ] >= n })
}

// until waits until ok, called under g.mu, holds.
func (g *streamGate) until(what string, ok func() bool) {
	g.t.Helper()
	deadline := time.After(testwait.Timeout(g.t))
	for {
		g.mu.Lock()
		done := ok()
		g.mu.Unlock()
		if done {
			return
		}
		select {
		case <-g.held:
		case <-deadline:
			g.t.Fatalf("waiting for %s", what)
		}
	}
}

// passUntil hands the dashboard the messages held before the first of
// type typ, drops the rest, stops holding and cuts the stream: a
// connection that dropped while those were on their way.
func (g *streamGate) passUntil(typ string) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queue
	g.queue, g.hold, g.cut = nil, false, true
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(g.t))
	defer cancel()
	for _, m := range q {
		if m.typ == typ {
			break
		}
		if err := g.client.Write(ctx, websocket.MessageText, m.data); err != nil {
			g.t.Fatal(err)
		}
	}
	// A close the dashboard reads after the messages passed, as from a
	// proxy that went away.
	_ = g.client.Close(websocket.StatusGoingAway, "the stream was cut")
}

// The dashboard changed its task filter while a change of the old one
// was on its way: it took that message's cursor as the new filter's, and
// when the stream dropped before the new filter's snapshot came, the next
// connection resumed the new filter from that cursor. The server sent
// what changed since (nothing), and the runs of the new prefix reported
// before it never showed. The dashboard now takes tasks and cursors only
// from the messages that follow the answer to its last subscribe. The
// other tenant's runs of the same prefix never show.
func TestNewFilterTakesNoCursorOfTheOld(t *testing.T) {
	t.Parallel()
	ls := newLiveServer(t)
	running := func(id, job string) apollo.Event { return ev(id, job, 1, apollo.StatusRunning, 0) }
	ls.report(running("red-1", "red"), running("blue-1", "blue"))
	ls.reportAs("acme-agent", running("blue-other-1", "blue"))
	g := newStreamGate(t, ls.srv.URL)
	m, err := New(Options{Server: g.srv.URL, Token: "op-token", Refresh: time.Hour, noJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	w.untilText(t, "● live")
	for _, k := range []string{"2", "/", "r", "e", "d", "enter"} {
		tm.Send(keyMsg(k))
	}
	w.until(t, "the runs of red", func(sc screen) bool {
		return sc.tab == tabTasks && strings.Contains(sc.text, "filter: red") && strings.Contains(sc.text, "red-1") && !strings.Contains(sc.text, "blue-1")
	})
	// The list narrows as the filter is typed: the stream's answer for
	// red is the second snapshot.
	g.untilPassed(apiclient.MsgSnapshot, 2)

	// A change of red, held on its way; then the filter blue, whose
	// snapshot the server has sent when it is held too.
	g.holdMessages()
	ls.report(running("red-2", "red"))
	g.untilHeld(apiclient.MsgTasks)
	for _, k := range []string{"/", "backspace", "backspace", "backspace", "b", "l", "u", "e", "enter"} {
		tm.Send(keyMsg(k))
	}
	g.untilHeld(apiclient.MsgSnapshot)
	// The dashboard gets the change of red, and the stream drops before
	// the snapshot of blue reaches it.
	g.passUntil(apiclient.MsgSnapshot)

	w.until(t, "connected again, with the runs of blue", func(sc screen) bool {
		return g.opens.Load() == 2 && sc.state == stateLive && strings.Contains(sc.text, "filter: blue") && strings.Contains(sc.text, "blue-1")
	})
	ls.reportAs("acme-agent", running("blue-other-2", "blue"))
	ls.report(running("blue-2", "blue"))
	sc := w.until(t, "live, the tenant's runs of blue", func(sc screen) bool {
		return strings.Contains(sc.text, "blue-1") && strings.Contains(sc.text, "blue-2")
	})
	if strings.Contains(sc.text, "blue-other") || strings.Contains(sc.text, "red-") {
		t.Errorf("the dashboard shows another tenant's runs or the old filter's:\n%s", sc.text)
	}
}

// A subscribe the server refuses is answered by an error naming the
// field, and the server keeps the filter it had. The dashboard counts
// the refusal as the answer: counted as unanswered, it had every later
// answer taken for that one's, and the task list stopped following the
// stream until the next reconnect. Until it asks again, it takes nothing
// of the filter the server kept.
func TestRefusedFilterIsAnswered(t *testing.T) {
	t.Parallel()
	s := start(t, func(o *Options) { o.Refresh = -1 })
	s.press("/", "x", "enter")
	if sub := s.conn.expect(); sub["type"] != "subscribe" {
		t.Fatalf("after the filter the client sent %v", sub)
	}
	s.conn.send(`{"type":"error","message":"over 256 bytes","code":"invalid","field":"filter.prefix"}`)
	// The filter the server kept goes on.
	kept := apollo.Task{TaskID: "x-kept-1", Name: "x-kept", Status: apollo.StatusRunning, Sequence: 1, UpdatedAt: ms(time.Second)}
	s.conn.send(`{"type":"tasks","cursor":"c.40","tasks":[` + mustJSON(kept) + `]}`)
	s.conn.send(`{"type":"heartbeat","ts":1,"cursor":"c.41"}`)
	waitEcho(t, s.conn)
	sc := s.w.until(t, "the screen after the heartbeat", func(screen) bool { return true })
	if strings.Contains(sc.text, "x-kept-1") {
		t.Errorf("the dashboard took a task of the filter the server kept:\n%s", sc.text)
	}
	if !strings.Contains(sc.text, "The server refused the task filter (filter.prefix: over 256 bytes)") {
		t.Errorf("the refusal is not told:\n%s", sc.text)
	}

	// Asked again, the answer is the new filter's.
	s.press("esc")
	if sub := s.conn.expect(); sub["type"] != "subscribe" || sub["cursor"] != nil {
		t.Fatalf("clearing the filter sent %v, want a subscribe without a cursor", sub)
	}
	fresh := apollo.Task{TaskID: "fresh-1", Name: "fresh", Status: apollo.StatusRunning, Sequence: 1, UpdatedAt: ms(2 * time.Second)}
	s.conn.send(snapshotJSON("c.50", []apollo.Task{fresh}))
	s.w.until(t, "the answer's tasks", func(sc screen) bool {
		return strings.Contains(sc.text, "fresh-1") && !strings.Contains(sc.text, "batch_orders-0042")
	})
	live := apollo.Task{TaskID: "fresh-2", Name: "fresh", Status: apollo.StatusRunning, Sequence: 1, UpdatedAt: ms(3 * time.Second)}
	s.conn.send(`{"type":"tasks","cursor":"c.51","tasks":[` + mustJSON(live) + `]}`)
	s.w.untilText(t, "fresh-2")

	// The cursor resumed from is the answer's stream's.
	s.conn.c.Close(websocket.StatusGoingAway, "server shutting down")
	s.w.untilText(t, "reconnecting in")
	if !s.clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no reconnect timer armed")
	}
	s.clock.Advance(time.Second)
	conn := s.srv.accept()
	conn.send(helloJSON("c.60"))
	if sub := conn.expect(); sub["cursor"] != "c.51" {
		t.Fatalf("after reconnecting the client sent %v, want a subscribe with cursor c.51", sub)
	}
}
