package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
)

// As TestHugeNamesCostTheScreenNoMore for the Alerts tab: rules, groups,
// summaries, who acknowledged and the silences' rules, prefixes, authors
// and comments of a megabyte (a server that is not ours may send them)
// cost the tab no more to draw than text of a line.
func TestHugeAlertTextCostsTheScreenNoMore(t *testing.T) {
	// Not Parallel: it counts the process's allocations (renderAlloc).
	if raceEnabled {
		t.Skip("counts allocations, which the race detector changes (race_on_test.go)")
	}
	draw := func(n int) (uint64, string) {
		m, err := New(Options{Server: "http://apollo.example:1969", Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		big := func(s string) string { return s + strings.Repeat("\x1b\u202e日\u0301👩", n/13) + "-end" }
		var as []apollo.Alert
		for i := range 20 {
			as = append(as, apollo.Alert{ID: big("a") + string(rune('a'+i)), Rule: big("rule"), Group: big("group"), Summary: big("summary"),
				AckedBy: big("who"), State: apollo.AlertFiring, Severity: apollo.SeverityCritical, StartedAt: t0.Add(-time.Minute)})
		}
		m.alerts.SetListed(m.alerts.BeginListing(), as, len(as), nil)
		var ss []apollo.Silence
		for range 10 {
			ss = append(ss, apollo.Silence{Rule: big("srule"), Prefix: big("prefix"), CreatedBy: big("by"), Comment: big("comment"), EndsAt: t0.Add(time.Hour)})
		}
		m.alerts.SetSilences(ss, nil)
		m.setTab(tabAlerts)
		m.render()
		bytes, out := renderAlloc(m)
		return bytes, ansi.Strip(out)
	}
	small, _ := draw(64)
	huge, out := draw(1 << 20)
	if huge > 4*small+1<<20 {
		t.Errorf("the Alerts tab with text of a megabyte allocated %d bytes, with text of a line %d", huge, small)
	}
	if !strings.Contains(out, "rule") || !strings.Contains(out, "Silences (10)") {
		t.Errorf("the alerts and silences do not show:\n%s", out)
	}
	checkCells(t, "huge alert text", out, ansi.WcWidth, 120, 40)
}
