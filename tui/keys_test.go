package tui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// session is a dashboard running as a real Bubble Tea program against a
// fake server, with a fake clock.
type session struct {
	t     *testing.T
	srv   *fakeServer
	clock *apollo.FakeClock
	w     watched
	tm    *teatest.TestModel
	conn  *serverConn
	// shown is the screen start waited for: the Tasks tab with the
	// snapshot on it. A test that checks the screen before its first key
	// reads it here, since no further screen comes until something happens.
	shown screen
}

// start runs the dashboard, accepts its stream connection, says hello and
// sends the fixture's snapshot and alerts; the job health board, the first
// tab, shows the fixture's; then it goes to the Tasks tab and returns once
// the tasks are on the screen.
func start(t *testing.T, edit func(*Options)) *session {
	t.Helper()
	s := &session{t: t, srv: newFakeServer(t), clock: apollo.NewFakeClock(t0)}
	opts := Options{Server: s.srv.srv.URL, Token: "test-token", Clock: s.clock, noJitter: true}
	if edit != nil {
		edit(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.w = watch(m)
	s.tm = teatest.NewTestModel(t, s.w, teatest.WithInitialTermSize(120, 40))
	t.Cleanup(func() {
		s.tm.Quit()
		s.tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
		m.Close()
	})
	s.conn = s.srv.accept()
	s.conn.send(helloJSON("c.1"))
	if sub := s.conn.expect(); sub["type"] != "subscribe" || sub["cursor"] != nil {
		t.Fatalf("first message %v, want a subscribe without a cursor", sub)
	}
	s.conn.send(snapshotJSON("c.7", fixtureTasks()))
	for _, a := range fixtureAlerts() {
		s.conn.send(alertJSON(a))
	}
	s.w.until(t, "the health board", func(sc screen) bool { return sc.tab == tabHealth && hasRow(sc.text, "failing", "batch_invoices") })
	s.press("2")
	s.shown = s.w.until(t, "the Tasks tab", func(sc screen) bool {
		return sc.tab == tabTasks && strings.Contains(sc.text, "batch_orders-0041")
	})
	return s
}

func (s *session) press(keys ...string) {
	for _, k := range keys {
		s.tm.Send(keyMsg(k))
	}
}

// keyMsg builds the key press that Bubble Tea would decode for k.
func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

func TestKeysNavigate(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	tasks := fixtureTasks()
	steps := []struct {
		keys []string
		want string
	}{
		{[]string{"j"}, tasks[1].TaskID},
		{[]string{"down", "down"}, tasks[3].TaskID},
		{[]string{"k"}, tasks[2].TaskID},
		{[]string{"up"}, tasks[1].TaskID},
		{[]string{"G"}, tasks[len(tasks)-1].TaskID},
		{[]string{"j"}, tasks[len(tasks)-1].TaskID}, // stops at the end
		{[]string{"g"}, tasks[0].TaskID},
		{[]string{"k"}, tasks[0].TaskID}, // and at the top
	}
	// The first task is selected when the tab opens. That screen was
	// start's: waiting for another would wait for nothing to happen.
	if s.shown.selected != tasks[0].TaskID {
		t.Fatalf("selection %q when the tab opened, want %q", s.shown.selected, tasks[0].TaskID)
	}
	for _, st := range steps {
		s.press(st.keys...)
		s.w.until(t, "selection "+st.want, func(sc screen) bool { return sc.selected == st.want })
	}
	// The selection follows its task when a newer change reorders the list.
	s.press("j", "j") // etl_sales
	s.w.until(t, "etl selected", func(sc screen) bool { return sc.selected == tasks[2].TaskID })
	moved := tasks[3]
	moved.Sequence, moved.UpdatedAt = 3, ms(0)
	s.conn.send(`{"type":"tasks","cursor":"c.8","tasks":[` + mustJSON(moved) + `]}`)
	s.w.until(t, "report_daily on top, etl still selected", func(sc screen) bool {
		return strings.Index(sc.text, "report_daily-1129") < strings.Index(sc.text, "batch_orders-0042") && sc.selected == tasks[2].TaskID
	})
}

func TestKeysTabs(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	steps := []struct {
		key  string
		want tab
		text string
	}{
		{"tab", tabJobs, "RUNS/MIN"},
		{"tab", tabAlerts, "batch_failures"},
		{"tab", tabSystem, "stream clients"},
		{"tab", tabHealth, "RECENT RUNS"},
		{"tab", tabTasks, "STARTED"},
		{"shift+tab", tabHealth, "no recent runs"},
		{"shift+tab", tabSystem, "stream clients"},
		{"shift+tab", tabAlerts, "SEVERITY"},
		{"2", tabTasks, "STARTED"},
		{"5", tabSystem, "holdLimit"},
		{"3", tabJobs, "last hour"},
		{"4", tabAlerts, "Silences (1)"},
		{"1", tabHealth, "batch_invoices · last success"},
	}
	for _, st := range steps {
		s.press(st.key)
		s.w.until(t, tabNames[st.want], func(sc screen) bool { return sc.tab == st.want && strings.Contains(sc.text, st.text) })
	}
	s.press("?")
	s.w.untilText(t, "go to tab")
	s.press("?")
	s.w.until(t, "help closed", func(sc screen) bool { return !strings.Contains(sc.text, "go to tab") })
}

func TestKeysFilter(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.press("/", "b", "a", "t", "c", "h", "_", "i")
	// The list narrows while typing...
	s.w.until(t, "only batch_i", func(sc screen) bool {
		return strings.Contains(sc.text, "batch_invoices-0017") && !strings.Contains(sc.text, "batch_orders-0042") && strings.Contains(sc.text, "1 tasks")
	})
	// ...and on enter the stream is asked for that prefix, from a new
	// snapshot (no cursor).
	s.press("enter")
	sub := s.conn.expect()
	f, _ := sub["filter"].(map[string]any)
	if sub["type"] != "subscribe" || f["prefix"] != "batch_i" || sub["cursor"] != nil {
		t.Fatalf("after the filter the client sent %v", sub)
	}
	s.w.untilText(t, "filter: batch_i")
	s.press("esc")
	sub = s.conn.expect()
	if f, _ := sub["filter"].(map[string]any); f["prefix"] != nil {
		t.Fatalf("clearing the filter sent %v", sub)
	}
	s.w.untilText(t, "7 tasks")
}

func TestKeysEnterShowsTimeline(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.press("j", "enter")
	r := s.srv.request("GET /api/v1/tasks/batch_invoices-0017")
	if r.method != "GET" {
		t.Fatal(r)
	}
	s.w.until(t, "the timeline", func(sc screen) bool {
		return sc.detail == "batch_invoices-0017" && strings.Contains(sc.text, "invoice 991: missing currency")
	})
	s.press("esc")
	s.w.until(t, "back to the list", func(sc screen) bool { return sc.detail == "" && strings.Contains(sc.text, "STARTED") })
}

func TestKeysAck(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.press("4")
	s.w.untilText(t, "batch_failures")
	s.press("a") // the firing alert is first
	if m := s.conn.expect(); m["type"] != "ack" || m["alert"] != "a-1" {
		t.Fatalf("a sent %v, want an ack of a-1", m)
	}
	s.w.untilText(t, "Acknowledging batch_failures (batch_)…")
	s.conn.send(`{"type":"ack_result","alert":"a-1","ok":true}`)
	s.w.untilText(t, "Acknowledged batch_failures (batch_).")
	acked := fixtureAlerts()[0]
	acked.AckedBy = "oscar"
	s.conn.send(alertJSON(acked))
	s.w.until(t, "acked by oscar", func(sc screen) bool {
		for _, l := range strings.Split(sc.text, "\n") {
			if strings.Contains(l, "batch_failures") && strings.Contains(l, "oscar") {
				return true
			}
		}
		return false
	})
	// A refusal is shown as the server words it.
	s.press("j", "a")
	if m := s.conn.expect(); m["alert"] != "a-2" {
		t.Fatalf("second ack %v", m)
	}
	s.conn.send(`{"type":"ack_result","alert":"a-2","ok":false,"error":"acknowledging needs the operator role; the token has viewer"}`)
	s.w.untilText(t, "Could not acknowledge etl_slow: acknowledging needs the operator role")
}

// An ack whose answer the closing stream cut off may have been made: the
// dashboard says so, not "try again" (a second ack of a made one is
// refused), and the list read after the reconnect shows it.
func TestAckCutOffByAClosedStream(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.press("4")
	s.w.untilText(t, "batch_failures")
	s.press("a")
	if m := s.conn.expect(); m["type"] != "ack" || m["alert"] != "a-1" {
		t.Fatalf("a sent %v, want an ack of a-1", m)
	}
	s.conn.c.Close(websocket.StatusGoingAway, "stopping")
	sc := s.w.untilText(t, "it may have been acknowledged")
	if strings.Contains(sc.text, "try again") {
		t.Errorf("the dashboard tells to try an ack that may have been made again:\n%s", sc.text)
	}
}

func TestKeysSilence(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.press("4")
	s.w.untilText(t, "batch_failures")
	s.press("s")
	// The hint names the form's keys: tab goes to the next field here, not
	// to the next tab (issue 21: it offered both).
	if sc := s.w.untilText(t, "Silence batch_failures"); !strings.Contains(sc.text, "tab next field") || strings.Contains(sc.text, "next tab") {
		t.Errorf("the form's hint:\n%s", sc.text)
	}
	// The duration field starts at 1h: replace it with 4h, then comment.
	s.tm.Send(tea.KeyPressMsg{Code: tea.KeyBackspace})
	s.tm.Send(tea.KeyPressMsg{Code: tea.KeyBackspace})
	s.tm.Type("4h")
	s.press("enter")
	s.press("enter") // no comment yet: refused in the form
	s.w.untilText(t, "write a comment")
	s.tm.Type("deploy in progress")
	s.press("enter")
	r := s.srv.request("POST /api/v1/silences")
	var body apiclient.SilenceRequest
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatal(err)
	}
	if body.Rule != "batch_failures" || body.Group != "batch_" || body.Prefix != "" || body.Comment != "deploy in progress" ||
		body.EndsAt.Sub(body.StartsAt) != 4*time.Hour || !body.StartsAt.Equal(t0) {
		t.Fatalf("silence request %+v", body)
	}
	s.w.untilText(t, "Silenced batch_failures (batch_) for 4h0m0s.")
	s.srv.request("GET /api/v1/silences") // listed again
}

func TestKeysQuit(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"q", "ctrl+c"} {
		t.Run(k, func(t *testing.T) {
			s := start(t, nil)
			s.press(k)
			s.tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
		})
	}
}

// The health board, the first tab, is fetched again on every refresh, and
// enter takes the selected job to the Jobs tab, selected there.
func TestKeysHealth(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.srv.request("GET /api/v1/jobs/health")
	s.press("1")
	s.w.until(t, "the board", func(sc screen) bool { return sc.tab == tabHealth && hasRow(sc.text, "failing", "batch_invoices") })
	// A refresh reads the board again: the job now succeeds.
	board := fixtureHealth()
	board.Jobs[0].Verdict = apollo.VerdictOK
	board.Verdicts = map[apollo.Verdict]int{apollo.VerdictOK: 6}
	s.srv.mu.Lock()
	s.srv.routes["GET /api/v1/jobs/health"] = mustJSON(board)
	s.srv.mu.Unlock()
	// Armed: the stream's read watchdog and the refresh timer.
	if !s.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("no refresh timer armed")
	}
	s.clock.Advance(10 * time.Second)
	s.srv.request("GET /api/v1/jobs/health")
	s.w.until(t, "the board read again", func(sc screen) bool {
		return hasRow(sc.text, "ok", "batch_invoices") && strings.Contains(sc.text, "6 ok")
	})
	s.press("j", "j", "j", "j", "enter") // batch_orders
	s.w.until(t, "batch_orders in the Jobs tab", func(sc screen) bool {
		return sc.tab == tabJobs && strings.Contains(sc.text, "batch_orders · last hour")
	})
}
