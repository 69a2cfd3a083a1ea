package tui

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// evil is what a reporter can put in any text: a window title, a bell, a
// screen clear, a colour, a C1 CSI, a bidi override, DEL.
const evil = "\x1b]0;pwned\a\x1b[2J\x1b[31m\u009b\u202e\x7f"

// evilEscaped is evil as the dashboard must show it.
const evilEscaped = `\u001b]0;pwned\u0007\u001b[2J\u001b[31m\u009b\u202e\u007f`

// injected matches what evil would leave on the screen unescaped: the
// title, the bell, the clear, C1, bidi, DEL. The colour shows with
// colorParams, since NO_COLOR sets none.
var injected = regexp.MustCompile("\x1b\\]|\a|\x1b\\[2J|[\x7f\u0080-\u009f\u202e]")

// Every screen shows text from the server escaped: the task list and a
// task's timeline (IDs, names, actors, reasons, extras), jobs, alerts,
// silences and the silence form, the system stats, who is signed in, why
// the connection dropped, and the notices that quote the server (issue
// 16.9).
func TestScreensEscapeWhatServersSay(t *testing.T) {
	t.Parallel()
	m, err := New(Options{Server: "http://apollo.example:1969", Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	task := apollo.Task{TaskID: "ev-" + evil, Name: "job_" + evil, Status: apollo.StatusFailed, Sequence: 3,
		StartedAt: ms(-time.Minute), UpdatedAt: ms(-time.Second)}
	alert := apollo.Alert{ID: "a-1", Rule: "rule_" + evil, Group: "group_" + evil, State: apollo.AlertFiring,
		Severity: apollo.SeverityCritical, Summary: evil, AckedBy: evil, StartedAt: t0.Add(-time.Minute)}
	hello := `{"type":"hello","cursor":"c.1","heartbeatMs":15000,"principal":` +
		mustJSON(map[string]string{"name": evil, "role": "operator", "tenant": evil}) + `}`
	for _, s := range []string{hello, snapshotJSON("c.2", []apollo.Task{task}), alertJSON(alert)} {
		f, err := apiclient.DecodeFrame([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		m.Update(frameMsg{gen: m.conn.gen, f: f})
	}
	m.Update(systemMsg{stats: json.RawMessage(mustJSON(map[string]any{"bus": map[string]any{evil: 1, "host": evil}}))})
	m.Update(healthMsg{board: apiclient.HealthBoard{Total: 1, Verdicts: map[apollo.Verdict]int{apollo.Verdict(evil): 1},
		Jobs: []apiclient.JobHealth{{Name: "job_" + evil, Verdict: apollo.Verdict(evil),
			LastRun: &apiclient.Run{TaskID: evil, Status: apollo.StatusFailed}, Runs: []apiclient.Run{{TaskID: evil, Status: apollo.StatusFailed}}}}}})
	m.Update(metricsMsg{page: apiclient.MetricsPage{Jobs: []apiclient.JobRow{{Name: "job_" + evil, Count: 3, Failed: 1}}}})
	m.Update(seriesMsg{name: "job_" + evil, err: errors.New(evil)})
	m.Update(alertsMsg{alerts: []apollo.Alert{alert}})
	m.Update(silencesMsg{silences: []apollo.Silence{{ID: "s-1", Rule: evil, Prefix: evil, CreatedBy: evil, Comment: evil,
		EndsAt: t0.Add(time.Hour)}}})

	check := func(what string) {
		t.Helper()
		out := m.render()
		if loc := injected.FindStringIndex(out); loc != nil {
			t.Errorf("%s: %q reaches the terminal:\n%q", what, out[loc[0]:loc[1]], out)
		}
		if c := colorParams(out); len(c) > 0 {
			t.Errorf("%s: a colour reaches the terminal under NO_COLOR: %q", what, c[0])
		}
		if !strings.Contains(out, evilEscaped) && !strings.Contains(out, evilEscaped[:20]) {
			t.Errorf("%s: the server's text is not on the screen, escaped:\n%s", what, out)
		}
	}
	for tb := range numTabs {
		m.tab = tb
		check(tabNames[tb])
	}

	// A task's timeline: a correction's actor and reason, an extra.
	m.tab = tabTasks
	m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	task.History = []apollo.Record{
		{Event: apollo.Event{TaskID: task.TaskID, Sequence: 1, Status: apollo.StatusRunning, Ts: ms(-time.Minute),
			Extra: json.RawMessage(mustJSON(map[string]string{"note": evil}))}, Kind: apollo.KindReport},
		{Event: apollo.Event{TaskID: task.TaskID, Sequence: 2, Status: apollo.StatusFailed, Ts: ms(-time.Second)},
			Kind: apollo.KindCorrection, Actor: evil, Reason: evil},
	}
	m.Update(taskMsg{id: task.TaskID, task: task})
	check("the task's timeline")
	m.Update(taskMsg{id: task.TaskID, err: errors.New(evil)})
	check("the task that did not load")
	m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})

	// The silence form names the alert's rule and group.
	m.tab = tabAlerts
	m.Update(tea.KeyPressMsg{Code: 's', Text: "s"})
	check("the silence form")
	// A proxy's plain-text answer is quoted in the error (apiclient).
	m.Update(silencedMsg{err: errors.New(evil)})
	check("the silence form's error")
	m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})

	// Notices quote the server; the header says why the stream closed.
	m.handleFrame(apiclient.Frame{Type: apiclient.MsgError, Msg: &apiclient.StreamError{Message: evil, Hint: evil}})
	check("a notice")
	m.lost(errors.New(evil))
	check("the connection's state")
}
