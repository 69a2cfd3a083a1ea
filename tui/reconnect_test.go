package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// TestReconnect: the connection drops; the header says reconnecting and
// counts down; failed attempts back off (0.5s, 1s, 2s); a new connection
// says hello, the dashboard subscribes with the last cursor it got, and
// is live again with the changes it missed.
func TestReconnect(t *testing.T) {
	t.Parallel()
	s := start(t, func(o *Options) { o.Refresh = -1 })
	late := apollo.Task{TaskID: "late_one-1", Name: "late_one", Status: apollo.StatusRunning, Sequence: 1, UpdatedAt: ms(time.Second)}
	s.conn.send(`{"type":"tasks","cursor":"c.9","tasks":[` + mustJSON(late) + `]}`)
	s.conn.send(`{"type":"heartbeat","ts":1,"cursor":"c.12"}`)
	waitEcho(t, s.conn) // the heartbeat, and the cursor it carried, were taken
	s.w.untilText(t, "late_one-1")

	s.conn.c.Close(websocket.StatusGoingAway, "server shutting down")
	s.w.until(t, "reconnecting in 1s", func(sc screen) bool {
		return sc.state == stateWaiting && strings.Contains(sc.text, "○ reconnecting in 1s (server shutting down)")
	})
	s.srv.down.Store(true)
	step := func(d time.Duration, header string) {
		t.Helper()
		if !s.clock.BlockUntil(1, testwait.Timeout(t)) {
			t.Fatal("no reconnect timer armed")
		}
		s.clock.Advance(d)
		s.w.until(t, header, func(sc screen) bool { return strings.Contains(sc.text, header) })
	}
	step(500*time.Millisecond, "reconnecting in 1s (opening the stream: the server answered 503") // 2nd wait: 1s
	step(time.Second, "reconnecting in 2s")                                                       // 3rd: 2s
	step(time.Second, "reconnecting in 1s")                                                       // counting down
	s.srv.down.Store(false)
	if !s.clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no reconnect timer armed")
	}
	s.clock.Advance(time.Second)

	conn := s.srv.accept()
	s.w.until(t, "connecting", func(sc screen) bool {
		return sc.state == stateConnecting && strings.Contains(sc.text, "◌ connecting")
	})
	conn.send(helloJSON("c.20"))
	sub := conn.expect()
	if sub["type"] != "subscribe" || sub["cursor"] != "c.12" {
		t.Fatalf("after reconnecting the client sent %v, want a subscribe with cursor c.12", sub)
	}
	missed := apollo.Task{TaskID: "missed-1", Name: "missed", Status: apollo.StatusFailed, Sequence: 2, UpdatedAt: ms(2 * time.Second)}
	conn.send(`{"type":"tasks","cursor":"c.21","resumed":true,"tasks":[` + mustJSON(missed) + `]}`)
	s.w.until(t, "live with the missed change", func(sc screen) bool {
		return sc.state == stateLive && strings.Contains(sc.text, "● live") && strings.Contains(sc.text, "missed-1") &&
			strings.Contains(sc.text, "late_one-1") // what it held before stays
	})

	// The backoff starts over after a good connection.
	conn.c.Close(websocket.StatusTryAgainLater, "too slow: resubscribe with a cursor")
	s.w.untilText(t, "reconnecting in 1s (too slow: resubscribe with a cursor)")
	if !s.clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no reconnect timer armed")
	}
	s.clock.Advance(500 * time.Millisecond)
	conn = s.srv.accept()
	conn.send(helloJSON("c.30"))
	if sub := conn.expect(); sub["cursor"] != "c.21" {
		t.Fatalf("second resume sent %v, want cursor c.21", sub)
	}
}

// waitEcho waits for the client's answer to a heartbeat.
func waitEcho(t *testing.T, c *serverConn) {
	t.Helper()
	for {
		select {
		case m := <-c.in:
			if strings.Contains(m, `"heartbeat"`) {
				return
			}
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("no heartbeat echo")
		}
	}
}

// TestRefusedToken: a refused token is said in the header and not retried
// on its own; r tries again.
func TestRefusedToken(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t)
	clock := apollo.NewFakeClock(t0)
	m, err := New(Options{Server: srv.srv.URL, Token: "wrong", Clock: clock, Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	defer m.Close()
	w.until(t, "refused", func(sc screen) bool {
		return sc.state == stateRefused && strings.Contains(sc.text, "✕ refused (the server refused the token")
	})
	if n := clock.Waiters(); n != 0 {
		t.Errorf("%d timers armed after a refusal: it is retrying by itself", n)
	}
	if len(srv.dials) != 1 {
		t.Fatalf("%d attempts, want 1", len(srv.dials))
	}
	tm.Send(tea.KeyPressMsg{Code: 'r', Text: "r"})
	w.until(t, "a second attempt, refused", func(sc screen) bool { return sc.state == stateRefused && len(srv.dials) == 2 })
	tm.Quit()
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

// TestNoHello: a server that opens the stream and never says hello (a
// proxy that took the upgrade and stalls, a hub that hangs) leaves the
// dashboard connecting; r, which the help offers whenever it is not live,
// gives up on that connection and opens another, and without r the
// dashboard gives up by itself after three default heartbeat intervals.
// Before, r did nothing while connecting, and the wait for hello had no
// end: the header said "◌ connecting" for ever.
func TestNoHello(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t)
	clock := apollo.NewFakeClock(t0)
	m, err := New(Options{Server: srv.srv.URL, Token: "test-token", Clock: clock, Refresh: -1, noJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	defer m.Close()
	first := srv.accept()
	w.until(t, "connecting", func(sc screen) bool {
		return sc.state == stateConnecting && strings.Contains(sc.text, "◌ connecting")
	})
	tm.Send(tea.KeyPressMsg{Code: 'r', Text: "r"})
	second := srv.accept()
	select {
	case <-first.gone:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the connection given up on was not closed")
	}

	// The second says nothing either: the dashboard gives up on it.
	if !clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no deadline for the server's hello")
	}
	clock.Advance(3 * 15 * time.Second)
	w.until(t, "reconnecting", func(sc screen) bool {
		return sc.state == stateWaiting && strings.Contains(sc.text, "(no message from the server in time)")
	})
	select {
	case <-second.gone:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the silent connection was not closed")
	}
	tm.Quit()
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

// TestRevokedToken: the server restarts without the dashboard's token.
// The header says refused, and no longer names who the token was: before,
// it went on showing "oscar (operator)" beside "✕ refused", as if still
// signed in.
func TestRevokedToken(t *testing.T) {
	t.Parallel()
	s := start(t, func(o *Options) { o.Refresh = -1 })
	if !strings.Contains(s.shown.text, "oscar (operator)") {
		t.Fatalf("the header does not name the principal:\n%s", s.shown.text)
	}
	s.tm.Send(tea.WindowSizeMsg{Width: 200, Height: 40}) // room for the reason and the principal
	s.srv.revoked.Store(true)
	s.conn.c.Close(websocket.StatusGoingAway, "server shutting down")
	s.w.untilText(t, "reconnecting in")
	if !s.clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no reconnect timer armed")
	}
	s.clock.Advance(time.Second)
	sc := s.w.until(t, "refused", func(sc screen) bool { return sc.state == stateRefused })
	if header := strings.SplitN(sc.text, "\n", 2)[0]; strings.Contains(header, "oscar") {
		t.Errorf("refused, the header still names the token's principal:\n%s", header)
	}
}
