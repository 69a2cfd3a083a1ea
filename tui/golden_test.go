package tui

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// newLoaded returns a dashboard that has received the whole fixture, as
// the messages its commands would have brought, without any I/O.
func newLoaded(t *testing.T, width, height int, noColor bool) *Model {
	t.Helper()
	m, err := New(Options{Server: "http://apollo.example:1969", Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: noColor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	frames := []string{helloJSON("c.1"), snapshotJSON("c.7", fixtureTasks())}
	for _, s := range frames {
		f, err := apiclient.DecodeFrame([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		m.Update(frameMsg{gen: m.conn.gen, f: f})
	}
	var mp apiclient.MetricsPage
	if err := json.Unmarshal([]byte(fixtureMetrics), &mp); err != nil {
		t.Fatal(err)
	}
	// As the API answers when the System tab opens: the stream sends the
	// system message only while the tab shows.
	m.Update(systemMsg{stats: json.RawMessage(fixtureSystem)})
	m.Update(healthMsg{board: fixtureHealth()})
	m.Update(metricsMsg{page: mp})
	var series struct{ Points []apiclient.JobRow }
	if err := json.Unmarshal([]byte(fixtureSeries(m.jobs.Selected())), &series); err != nil {
		t.Fatal(err)
	}
	m.Update(seriesMsg{name: m.jobs.Selected(), points: series.Points})
	m.Update(alertsMsg{alerts: fixtureAlerts()})
	var ss struct{ Silences []apollo.Silence }
	if err := json.Unmarshal([]byte(fixtureSilences), &ss); err != nil {
		t.Fatal(err)
	}
	m.Update(silencesMsg{silences: ss.Silences})
	return m
}

// TestGolden draws every tab at 80×24, 120×40 and 160×45 from the
// fixture. Rewrite the files with: go test ./tui -run TestGolden -update
func TestGolden(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}, {160, 45}} {
		m := newLoaded(t, size[0], size[1], false)
		for tb := range numTabs {
			name := fmt.Sprintf("%s-%dx%d", strings.ToLower(tabNames[tb]), size[0], size[1])
			t.Run(name, func(t *testing.T) {
				m.tab = tb
				out := ansi.Strip(m.render())
				checkSize(t, out, size[0], size[1])
				golden.RequireEqual(t, out)
			})
		}
		// The silence form: its hint names its own keys, not the tabs'.
		t.Run(fmt.Sprintf("silence-%dx%d", size[0], size[1]), func(t *testing.T) {
			m.tab = tabAlerts
			m.Update(tea.KeyPressMsg{Code: 's', Text: "s"})
			out := ansi.Strip(m.render())
			checkSize(t, out, size[0], size[1])
			golden.RequireEqual(t, out)
			if strings.Contains(out, "next tab") {
				t.Error("the silence form's hint offers the tab key for the next tab")
			}
			m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
		})
		t.Run(fmt.Sprintf("timeline-%dx%d", size[0], size[1]), func(t *testing.T) {
			m.tab = tabTasks
			m.tasks.SetSize(m.width, m.height-chrome)
			for m.tasksSelected() != "batch_invoices-0017" {
				m.Update(tea.KeyPressMsg{Code: 'j', Text: "j"})
			}
			m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
			m.Update(taskMsg{id: "batch_invoices-0017", task: fixtureTask()})
			out := ansi.Strip(m.render())
			checkSize(t, out, size[0], size[1])
			golden.RequireEqual(t, out)
			m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
		})
	}
}

func (m *Model) tasksSelected() string {
	s, _ := m.tasks.Selected()
	return s.TaskID
}

// checkSize fails unless out is exactly h lines of at most w cells.
func checkSize(t *testing.T, out string, w, h int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("line %d is %d cells wide, over %d: %q", i+1, n, w, l)
		}
	}
}

// sgr matches one Select Graphic Rendition sequence and captures its
// parameters.
var sgr = regexp.MustCompile("\x1b\\[([0-9;:]*)m")

// colorParams returns the SGR parameters in s that set a color.
func colorParams(s string) []string {
	var found []string
	for _, m := range sgr.FindAllStringSubmatch(s, -1) {
		for p := range strings.SplitSeq(m[1], ";") {
			n, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
			if err != nil {
				continue
			}
			if n >= 30 && n <= 49 && n != 39 && n != 49 || n >= 90 && n <= 107 {
				found = append(found, m[0])
			}
		}
	}
	return found
}

// TestNoColor: with NO_COLOR the screen sets no color on any tab, and
// still marks the selection (reverse video); with colors it does color.
func TestNoColor(t *testing.T) {
	t.Parallel()
	plain := newLoaded(t, 120, 40, true)
	colored := newLoaded(t, 120, 40, false)
	for tb := range numTabs {
		plain.tab, colored.tab = tb, tb
		if c := colorParams(plain.render()); len(c) > 0 {
			t.Errorf("%s with NO_COLOR sets colors: %q", tabNames[tb], c[0])
		}
		if tb == tabTasks && len(colorParams(colored.render())) == 0 {
			t.Error("the colored Tasks tab sets no color: the check above proves nothing")
		}
	}
	plain.tab = tabTasks
	if !strings.Contains(plain.render(), "\x1b[7m") {
		t.Error("with NO_COLOR the selected row is not in reverse video")
	}
}

// TestTinyTerminal: in a terminal shorter than the chrome and the
// smallest page (20×5, say) every screen is exactly the terminal's size,
// giving up an empty notice line, then the tabs, then the keys; the last
// action's result stays. Before, the screen kept all its lines and was
// taller than the terminal: its renderer cut the bottom ones, so the keys
// and the notice of an acknowledgement were never seen. Back at 80×24
// everything shows again.
func TestTinyTerminal(t *testing.T) {
	t.Parallel()
	m := newLoaded(t, 80, 24, true)
	for _, size := range [][2]int{{20, 5}, {20, 6}, {30, 4}, {10, 2}, {1, 1}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for tb := range numTabs {
			m.tab = tb
			checkSize(t, ansi.Strip(m.render()), size[0], size[1])
		}
		m.tab = tabAlerts
		m.Update(tea.KeyPressMsg{Code: '?', Text: "?"})
		checkSize(t, ansi.Strip(m.render()), size[0], size[1])
		m.Update(tea.KeyPressMsg{Code: 's', Text: "s"}) // closes the help, opens the form
		checkSize(t, ansi.Strip(m.render()), size[0], size[1])
		m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
		m.tab = tabTasks
		m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
		m.Update(taskMsg{id: "batch_invoices-0017", task: fixtureTask()})
		checkSize(t, ansi.Strip(m.render()), size[0], size[1])
		m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
	}

	m.Update(tea.WindowSizeMsg{Width: 20, Height: 5})
	m.tab = tabTasks
	out := ansi.Strip(m.render())
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "Apollo-11") || !strings.HasPrefix(lines[4], "? help") || strings.Contains(out, "2 Tasks") {
		t.Errorf("at 20×5, want the header, the page and the keys, without the tabs:\n%s", out)
	}
	m.say(false, "Acknowledged batch_failures (batch_).")
	out = ansi.Strip(m.render())
	lines = strings.Split(out, "\n")
	if !strings.HasPrefix(lines[4], "Acknowledged") {
		t.Errorf("at 20×5, the notice is not on the screen:\n%s", out)
	}

	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	out = ansi.Strip(m.render())
	checkSize(t, out, 80, 24)
	if lines := strings.Split(out, "\n"); !strings.Contains(lines[1], "2 Tasks") || !strings.HasPrefix(lines[22], "Acknowledged") || !strings.HasPrefix(lines[23], "? help") {
		t.Errorf("back at 80×24, the tabs, the notice or the keys are missing:\n%s", out)
	}
}
