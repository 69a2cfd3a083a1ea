package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/tui"
)

// shownTUI runs the dashboard and hands out what it draws after every
// message, the latest screen only.
type shownTUI struct {
	*tui.Model
	screens chan string
}

func (s shownTUI) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := s.Model.Update(msg)
	text := ansi.Strip(s.Model.View().Content)
	select {
	case s.screens <- text:
	default:
		select {
		case <-s.screens:
		default:
		}
		s.screens <- text
	}
	return s, cmd
}

// until waits for a screen that satisfies ok.
func (s shownTUI) until(t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.After(testwait.Timeout(t))
	last := ""
	for {
		select {
		case text := <-s.screens:
			if ok(text) {
				return text
			}
			last = text
		case <-deadline:
			t.Fatalf("the dashboard never showed %s; the screen was:\n%s", what, last)
		}
	}
}

// runTUI starts the dashboard against addr with token, on clock, in a
// terminal of 160×40; it ends with the test.
func runTUI(t *testing.T, addr, token string, clock apollo.Clock) (shownTUI, *tea.Program) {
	t.Helper()
	m, err := tui.New(tui.Options{Server: "http://" + addr, Token: token, Clock: clock, NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	s := shownTUI{Model: m, screens: make(chan string, 1)}
	in, keys := io.Pipe()
	p := tea.NewProgram(s, tea.WithInput(in), tea.WithOutput(&syncBuffer{}), tea.WithWindowSize(160, 40))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = p.Run() }()
	t.Cleanup(func() {
		p.Quit()
		<-done
		m.Close()
		keys.Close()
	})
	return s, p
}

// alertRow reports whether one line of the screen is rule's alert, with
// each of parts after the rule, in order; n counts such lines.
func alertRows(text, rule string, parts ...string) (n int) {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := l, strings.HasPrefix(strings.TrimSpace(l), "firing") && strings.Contains(l, " "+rule+" ")
		for _, p := range parts {
			i := strings.Index(rest, p)
			if !ok || i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			n++
		}
	}
	return n
}

// The dashboard is open on the Alerts tab when the server is killed with
// SIGKILL; the server comes back on the same address, and another
// operator acknowledges the alert before the dashboard reconnects. Once
// live again the dashboard shows the alert acknowledged, once, and never
// the other tenant's alert. Before, it read the alerts at start and every
// 10 s only, and merged what it read into what it held: after the
// reconnect it kept showing the alert unacknowledged until the next
// refresh, and an alert the server no longer had, for ever.
func TestTUIShowsAlertsAsTheyAreAfterServerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d := newDeployment(t, false, newHook(t), deployOptions{})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_rate task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n", tenant, tenant+"_"), nil, 200)
		d.fail(tenant, tenant+"_load")
	}
	a := d.firingAlert("acme", "acme_rate")
	d.firingAlert("globex", "globex_rate")
	// The API shows an alert as soon as a cycle fires it; the kill below
	// must come after the engine saved it, or the restart fires it again
	// under another ID (and the ack of this one is 404).
	eventually(t, 30*time.Second, "acme's alert saved", func() bool {
		b, _ := os.ReadFile(filepath.Join(d.dir, "data", "alerts.json"))
		return strings.Contains(string(b), a.ID)
	})

	clock := apollo.NewFakeClock(time.Now())
	s, p := runTUI(t, d.api.addr, d.tokens["acme"], clock)
	p.Send(tea.KeyPressMsg{Code: '4', Text: "4"})
	s.until(t, "acme's alert, live and not acknowledged", func(text string) bool {
		return strings.Contains(text, "● live") && alertRows(text, "acme_rate", "acme_", " - ") == 1
	})

	addr := d.api.addr
	d.api.kill()
	s.until(t, "the connection lost", func(text string) bool { return strings.Contains(text, "○ reconnecting") })
	// The next refresh and the reconnect wait are armed; neither is due.
	if !clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the dashboard armed no reconnect")
	}
	args := append([]string(nil), d.args...)
	for i := range args {
		if args[i] == "127.0.0.1:0" {
			args[i] = addr
		}
	}
	d.api = startApollo(t, args...)
	d.do("acme", "POST", "/api/v1/alerts/"+a.ID+"/ack", "", nil, 200)
	clock.Advance(time.Second) // the reconnect is due, the refresh (10 s) is not

	text := s.until(t, "acme's alert acknowledged by acme-admin after the reconnect", func(text string) bool {
		return strings.Contains(text, "● live") && alertRows(text, "acme_rate", "acme_", "acme-admin") == 1
	})
	if n := alertRows(text, "acme_rate", "acme_"); n != 1 {
		t.Errorf("acme's alert shown %d times:\n%s", n, text)
	}
	if strings.Contains(text, "globex") {
		t.Errorf("tenant acme's dashboard shows tenant globex's alert:\n%s", text)
	}
}
