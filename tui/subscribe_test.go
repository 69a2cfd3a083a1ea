package tui

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/stream"
)

// counted is a watched dashboard that counts the system messages the
// stream hands it, and notes how many it had when the answer to its last
// subscribe with a cursor came (resumed): the server sends nothing of
// the old filter after it.
type counted struct {
	watched
	system  *atomic.Int64
	resumed *atomic.Int64 // -1: no answer yet
}

func (c counted) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if f, ok := msg.(frameMsg); ok {
		switch m := f.f.Msg.(type) {
		case *apiclient.System:
			c.system.Add(1)
		case *apiclient.Tasks:
			if m.Resumed {
				c.resumed.Store(c.system.Load())
			}
		}
	}
	_, cmd := c.watched.Update(msg)
	return c, cmd
}

// countSystem is a stream client of token's tenant that asks for every
// kind of message and counts the system messages: what a dashboard could
// have been sent.
func (ls *liveServer) countSystem(token string) *atomic.Int64 {
	ls.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ls.srv.URL, "http")+"/api/v1/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		cancel()
		ls.t.Fatal(err)
	}
	conn.SetReadLimit(-1)
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe"}`)); err != nil {
		ls.t.Fatal(err)
	}
	n := new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if strings.HasPrefix(string(data), `{"type":"system"`) {
				n.Add(1)
			}
		}
	}()
	ls.t.Cleanup(func() { cancel(); conn.CloseNow(); <-done })
	return n
}

// untilCount waits until n reaches at least want.
func untilCount(t *testing.T, what string, n *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.After(testwait.Timeout(t))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n.Load() < want {
		select {
		case <-deadline:
			t.Fatalf("waiting for %s: %d of %d", what, n.Load(), want)
		case <-tick.C:
		}
	}
}

// The dashboard asked the stream for the system message on every tab, so
// that each terminal left on Tasks cost the server its tenant's figures
// every 5 s, for nothing. It now asks for them while the System tab is
// shown, and shows fresh figures when the tab opens. One tenant watches
// its tasks, the other its System tab, while a client of each tenant
// that asks for everything is sent the system messages.
func TestTabIsSentOnlyWhatItShows(t *testing.T) {
	t.Parallel()
	ls := newLiveServerWith(t, func(o *stream.Options) { o.SystemInterval = 50 * time.Millisecond })
	open := func(token string) (counted, *teatest.TestModel) {
		m, err := New(Options{Server: ls.srv.URL, Token: token, Refresh: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		c := counted{watched: watch(m), system: new(atomic.Int64), resumed: new(atomic.Int64)}
		c.resumed.Store(-1)
		tm := teatest.NewTestModel(t, c, teatest.WithInitialTermSize(120, 40))
		c.untilText(t, "● live")
		return c, tm
	}
	tasks, tasksTerm := open("acme-view")
	tasksTerm.Send(keyMsg("2"))
	tasks.until(t, "the Tasks tab", func(sc screen) bool { return sc.tab == tabTasks })
	sys, sysTerm := open("globex-view")
	sysTerm.Send(keyMsg("5"))
	sys.until(t, "the System tab", func(sc screen) bool { return sc.tab == tabSystem && strings.Contains(sc.text, "stream clients") })

	acme, globex := ls.countSystem("acme-view"), ls.countSystem("globex-view")
	untilCount(t, "system messages to a client that asks for everything", acme, 10)
	untilCount(t, "system messages to the System tab", sys.system, 10)
	untilCount(t, "the other tenant's system messages", globex, 10)
	if n := tasks.system.Load(); n > 1 {
		t.Errorf("the Tasks tab was sent %d system messages (one at most, on its way when it opened)", n)
	}

	// The Tasks tab shows the System tab: it asks for the figures, and
	// shows them at once; back on Tasks, they stop.
	tasksTerm.Send(keyMsg("5"))
	tasks.until(t, "the System tab, with figures", func(sc screen) bool { return sc.tab == tabSystem && strings.Contains(sc.text, "stream clients") })
	untilCount(t, "system messages once the System tab shows", tasks.system, 5)
	tasks.resumed.Store(-1)
	tasksTerm.Send(keyMsg("2"))
	tasks.until(t, "the Tasks tab again", func(sc screen) bool { return sc.tab == tabTasks })
	// The answer to the new subscribe (the tasks since the cursor) comes
	// after every system message sent before it: none after it.
	untilCount(t, "the answer to the subscribe", tasks.resumed, 0)
	after := tasks.resumed.Load()
	untilCount(t, "more system messages to a client that asks for everything", acme, acme.Load()+10)
	if n := tasks.system.Load() - after; n > 0 {
		t.Errorf("back on Tasks, the dashboard was sent %d more system messages", n)
	}
}

// Connected again after the stream went away (a server restart), the
// System tab showed the figures of before until the server's next system
// message: the dashboard now reads them at once. The system messages come
// every hour here, and the dashboard's own refresh too: only the
// reconnection can bring the figures of now.
func TestSystemTabAfterAReconnect(t *testing.T) {
	t.Parallel()
	ls := newLiveServerWith(t, func(o *stream.Options) { o.SystemInterval = time.Hour })
	m, err := New(Options{Server: ls.srv.URL, Token: "op-token", Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	w.untilText(t, "● live")
	tm.Send(keyMsg("5"))
	// The bus's row of counters (the stream's has an "accepted" too).
	busAccepted := func(n int) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^accepted +` + strconv.Itoa(n) + ` corrections `)
	}
	w.until(t, "the System tab, nothing accepted", func(sc screen) bool { return sc.tab == tabSystem && busAccepted(0).MatchString(sc.text) })

	ls.hub.Stop(context.Background())
	w.untilText(t, "reconnecting in")
	ls.report(ev("sys-1", "sys", 1, apollo.StatusRunning, 0), ev("sys-2", "sys", 1, apollo.StatusRunning, 0))
	ls.startStream()
	w.until(t, "live again, with the events accepted meanwhile", func(sc screen) bool {
		return sc.state == stateLive && busAccepted(2).MatchString(sc.text)
	})
}

// A system message that comes while the dashboard did not ask for one (a
// server of an older release sends them to every client; one on its way
// when the System tab was left) is not taken: opened later, the System
// tab showed it as the figures of now, "as of" the time it came, and the
// dashboard, having had one lately, did not read the figures itself.
func TestSystemMessageNotAskedForIsNotTaken(t *testing.T) {
	t.Parallel()
	m, err := New(Options{Server: "http://apollo.example:1969", Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	frame := func(s string) {
		t.Helper()
		f, err := apiclient.DecodeFrame([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		m.Update(frameMsg{gen: m.conn.gen, f: f})
	}
	frame(helloJSON("c.1"))
	frame(`{"type":"system","stats":{"bus":{"accepted":424242}}}`)
	m.Update(tea.KeyPressMsg{Code: '5', Text: "5"})
	if out := ansi.Strip(m.render()); strings.Contains(out, "424 242") {
		t.Errorf("the System tab shows a system message the dashboard did not ask for:\n%s", out)
	}
	// Asked for now (the tab shows): taken.
	frame(`{"type":"system","stats":{"bus":{"accepted":77}}}`)
	if out := ansi.Strip(m.render()); !regexp.MustCompile(`(?m)^accepted +77 `).MatchString(out) {
		t.Errorf("the System tab does not show the system message it asked for:\n%s", out)
	}
}
