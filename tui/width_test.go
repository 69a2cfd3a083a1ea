package tui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// clusters are text whose width a terminal may count otherwise than by
// its code points one by one: emoji joined by ZWJ, a flag sequence, a
// pair of regional indicators, a skin tone, combining accents, wide CJK
// and an emoji made wide by a variation selector.
var clusters = []string{"👨\u200d👩\u200d👧\u200d👦", "🏳\ufe0f\u200d🌈", "🇯🇵🇫🇷", "👍🏽", "e\u0301e\u0301", "日报", "❤\ufe0f"}

// TestScreensMeasureTextAsTheTerminalDoes draws every tab with job names
// and task IDs made of grapheme clusters. Bubble Tea lays the screen out
// by the width of each code point (wcwidth) unless the terminal says it
// counts whole clusters (mode 2027), and so do such terminals: text
// measured as clusters while the terminal counts code points made a row
// with a family emoji six cells wider than the table, which pushed its
// columns out of line and off the screen. Every line must fit the
// terminal as the renderer counts it, rows of one table must be of one
// width, and no cluster may be cut in two by the ellipsis.
func TestScreensMeasureTextAsTheTerminalDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		unicode bool // the terminal reported mode 2027
		method  ansi.Method
	}{
		{"code points", false, ansi.WcWidth},
		{"clusters (mode 2027)", true, ansi.GraphemeWidth},
	} {
		for _, size := range [][2]int{{80, 24}, {120, 40}} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				m := newClustered(t, size[0], size[1])
				if tc.unicode {
					m.Update(tea.ModeReportMsg{Mode: ansi.ModeUnicodeCore, Value: ansi.ModeReset})
				}
				for tb := range numTabs {
					m.tab = tb
					checkCells(t, tabNames[tb], m.render(), tc.method, size[0], size[1])
				}
				m.tab = tabTasks
				m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
				task := *m.store.list()[0]
				task.History = []apollo.Record{{Event: apollo.Event{TaskID: task.TaskID, Sequence: 1, Status: apollo.StatusRunning,
					Ts: ms(-time.Minute), Extra: json.RawMessage(mustJSON(map[string]string{"note": strings.Repeat(strings.Join(clusters, "_"), 20)}))},
					Kind: apollo.KindReport, Actor: strings.Join(clusters, "")}}
				m.Update(taskMsg{id: task.TaskID, task: task})
				checkCells(t, "the timeline", m.render(), tc.method, size[0], size[1])
			})
		}
	}
}

// newClustered is a dashboard whose every name is made of clusters.
func newClustered(t *testing.T, width, height int) *Model {
	t.Helper()
	m, err := New(Options{Server: "http://apollo.example:1969", Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	var tasks []apollo.Task
	var jobs []apiclient.JobRow
	var health []apiclient.JobHealth
	for i := range clusters {
		// Each name starts at another cluster, so that every kind falls
		// where a column cuts it at one size or another.
		name := strings.Repeat(strings.Join(append(clusters[i:], clusters[:i]...), "_"), 3)
		tasks = append(tasks, apollo.Task{TaskID: name + "-" + strings.Repeat(clusters[i], 9), Name: name, Status: apollo.StatusFailed,
			Sequence: 2, StartedAt: ms(-time.Minute), UpdatedAt: ms(-time.Duration(i) * time.Second)})
		jobs = append(jobs, apiclient.JobRow{Name: name, Count: 3, Failed: 1})
		health = append(health, apiclient.JobHealth{Name: name, Verdict: apollo.Verdict("failing"),
			LastRun: &apiclient.Run{TaskID: name, Status: apollo.StatusFailed}, Runs: []apiclient.Run{{TaskID: name, Status: apollo.StatusFailed}}})
	}
	alert := apollo.Alert{ID: "a-1", Rule: strings.Join(clusters, "_"), Group: strings.Join(clusters, ""), State: apollo.AlertFiring,
		Severity: apollo.SeverityCritical, Summary: strings.Repeat(strings.Join(clusters, " "), 5), StartedAt: t0.Add(-time.Minute)}
	hello := `{"type":"hello","cursor":"c.1","heartbeatMs":15000,"principal":` +
		mustJSON(map[string]string{"name": strings.Repeat(clusters[0], 40), "role": "operator", "tenant": strings.Repeat(clusters[2], 30)}) + `}`
	for _, s := range []string{hello, snapshotJSON("c.2", tasks), alertJSON(alert)} {
		f, err := apiclient.DecodeFrame([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		m.Update(frameMsg{gen: m.conn.gen, f: f})
	}
	m.Update(systemMsg{stats: json.RawMessage(mustJSON(map[string]any{"bus": map[string]any{strings.Repeat(clusters[0], 20): 1, "host": strings.Repeat(clusters[1], 30)}}))})
	m.Update(healthMsg{board: apiclient.HealthBoard{Total: len(health), Verdicts: map[apollo.Verdict]int{"failing": len(health)}, Jobs: health}})
	m.Update(metricsMsg{page: apiclient.MetricsPage{Jobs: jobs}})
	m.Update(alertsMsg{alerts: []apollo.Alert{alert}})
	m.Update(silencesMsg{silences: []apollo.Silence{{ID: "s-1", Rule: alert.Rule, Prefix: alert.Group, CreatedBy: clusters[0],
		Comment: strings.Repeat(clusters[1], 50), EndsAt: t0.Add(time.Hour)}}})
	return m
}

// checkCells checks a screen as a terminal counting with method shows it.
func checkCells(t *testing.T, what, screen string, method ansi.Method, w, h int) {
	t.Helper()
	lines := strings.Split(ansi.Strip(screen), "\n")
	if len(lines) != h {
		t.Errorf("%s: %d lines, want %d", what, len(lines), h)
	}
	widths := map[int]int{} // table rows: lines that end in a cell, by width
	for i, l := range lines {
		n := method.StringWidth(l)
		if n > w {
			t.Errorf("%s: line %d is %d cells wide as the terminal counts, over %d: %q", what, i+1, n, w, l)
		}
		if strings.Contains(l, "\u200d…") || strings.Contains(l, "…\u200d") || strings.Contains(l, "…\u0301") ||
			strings.HasPrefix(l, "\u200d") || strings.Contains(l, "…\ufe0f") || strings.Contains(l, "…🏽") {
			t.Errorf("%s: line %d cuts a cluster in two: %q", what, i+1, l)
		}
		if odd := oddIndicators(l); odd {
			t.Errorf("%s: line %d has a flag cut in two: %q", what, i+1, l)
		}
		if strings.HasPrefix(l, "failed ") || strings.HasPrefix(l, "failing ") {
			widths[n]++
		}
	}
	if len(widths) > 1 {
		t.Errorf("%s: rows of one table have different widths as the terminal counts them: %v\n%s", what, widths, strings.Join(lines, "\n"))
	}
}

// oddIndicators reports a run of regional indicators of odd length that
// is not followed by the rest of a pair: half a flag.
func oddIndicators(s string) bool {
	run := 0
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		if r >= 0x1f1e6 && r <= 0x1f1ff {
			run++
			continue
		}
		if run%2 == 1 {
			return true
		}
		run = 0
	}
	return run%2 == 1
}
