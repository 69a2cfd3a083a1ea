package pages

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

func TestParseSilenceDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"1h", time.Hour, ""},
		{" 90m ", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"2d", 48 * time.Hour, ""},
		{"366d", 366 * 24 * time.Hour, ""},
		{"367d", 0, "at most a year"},
		{"99999999999999d", 0, "at most a year"},
		{"0s", 0, "positive"},
		{"-1h", 0, "positive"},
		{"", 0, "not a duration"},
		{"d", 0, "not a duration"},
		{"soon", 0, "not a duration"},
	}
	for _, tt := range tests {
		got, err := ParseSilenceDuration(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: err %v, want one saying %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%q = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func env() Env {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return Env{Styles: components.NewStyles(true), Now: func() time.Time { return now }}
}

// TestNotAvailable: a server without the metrics, alert or silence routes
// (404) gets a sentence saying so, not an error.
func TestNotAvailable(t *testing.T) {
	t.Parallel()
	gone := &apollo.Error{Code: apollo.ENOTFOUND, Message: "not found"}
	broken := errors.New("connection refused")

	j := NewJobs(env())
	j.SetSize(80, 20)
	j.SetJobs("", apiclient.JobRow{}, nil, gone)
	if v := ansi.Strip(j.View()); !strings.Contains(v, "not available on this server") {
		t.Errorf("jobs on a server without metrics: %q", v)
	}
	j2 := NewJobs(env())
	j2.SetSize(80, 20)
	j2.SetJobs("", apiclient.JobRow{}, nil, broken)
	if v := ansi.Strip(j2.View()); !strings.Contains(v, "Could not load the job metrics: connection refused") {
		t.Errorf("jobs when the API fails: %q", v)
	}

	a := NewAlerts(env())
	a.SetSize(80, 20)
	a.SetListed(a.BeginListing(), nil, 0, gone)
	a.SetSilences(nil, gone)
	v := ansi.Strip(a.View())
	for _, want := range []string{"This server cannot list past alerts; new ones appear here live.", "Silences are not available on this server."} {
		if !strings.Contains(v, want) {
			t.Errorf("alerts view lacks %q:\n%s", want, v)
		}
	}
	// An alert from the stream still shows.
	a.Upsert(apollo.Alert{ID: "x", Rule: "r1", Group: "g", State: apollo.AlertFiring, Summary: "s"})
	if v := ansi.Strip(a.View()); !strings.Contains(v, "r1") || a.Firing() != 1 {
		t.Errorf("a streamed alert is missing:\n%s", v)
	}
}

// TestAlertsBounded: the page keeps MaxAlerts, dropping the oldest
// resolved ones first.
func TestAlertsBounded(t *testing.T) {
	t.Parallel()
	a := NewAlerts(env())
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var listed []apollo.Alert
	for i := range MaxAlerts + 50 {
		listed = append(listed, apollo.Alert{ID: fmt.Sprintf("r%d", i), State: apollo.AlertResolved, ResolvedAt: base.Add(time.Duration(i) * time.Minute)})
	}
	a.SetListed(a.BeginListing(), listed, len(listed), nil)
	if len(a.byID) != MaxAlerts {
		t.Fatalf("holding %d alerts after the listing", len(a.byID))
	}
	a.Upsert(apollo.Alert{ID: "firing", State: apollo.AlertFiring, StartedAt: base})
	if len(a.byID) != MaxAlerts {
		t.Fatalf("holding %d alerts", len(a.byID))
	}
	if _, ok := a.byID["firing"]; !ok {
		t.Error("the firing alert was dropped")
	}
	if a.shown[0].ID != "firing" {
		t.Errorf("first alert %s, want the firing one", a.shown[0].ID)
	}
	for i := range 50 { // the 50 oldest resolved ones went
		if _, ok := a.byID[fmt.Sprintf("r%d", i)]; ok {
			t.Fatalf("r%d kept", i)
		}
	}
}

// TestAlertsListedReplace: a listing of the alerts is what the server
// holds, so an alert it no longer lists goes, and so does one the stream
// says went inactive; a change the stream sent after the listing was
// asked for outlives the listing's answer, which may be older; an answer
// older than one applied is ignored. Before, a listing was merged into
// what the page held and an inactive alert was kept: a row stayed on
// screen, for ever, that the server had forgotten.
func TestAlertsListedReplace(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	alert := func(id string, st apollo.AlertState, ackedBy string) apollo.Alert {
		return apollo.Alert{ID: id, Rule: "rule_" + id, Group: "g", State: st, AckedBy: ackedBy, StartedAt: base}
	}
	ids := func(a *Alerts) string {
		var out []string
		for _, x := range a.shown {
			out = append(out, x.ID+":"+string(x.State)+":"+x.AckedBy)
		}
		return strings.Join(out, " ")
	}
	a := NewAlerts(env())
	a.SetSize(160, 30)
	a.SetListed(a.BeginListing(), []apollo.Alert{alert("gone", apollo.AlertFiring, ""), alert("kept", apollo.AlertFiring, ""),
		alert("pend", apollo.AlertPending, "")}, 3, nil)
	a.Upsert(alert("pend", apollo.AlertInactive, ""))
	if got, want := ids(a), "gone:firing: kept:firing:"; got != want {
		t.Fatalf("after the pending alert went inactive: %s, want %s", got, want)
	}

	older := a.BeginListing()
	newer := a.BeginListing()
	a.Upsert(alert("kept", apollo.AlertFiring, "oscar")) // after both were asked for
	a.Upsert(alert("new", apollo.AlertFiring, ""))
	// The newer answer was read before the acknowledgement and the new
	// alert; "gone" is no longer the server's.
	a.SetListed(newer, []apollo.Alert{alert("kept", apollo.AlertFiring, "")}, 1, nil)
	if got, want := ids(a), "kept:firing:oscar new:firing:"; got != want {
		t.Fatalf("after the listing: %s, want %s", got, want)
	}
	a.SetListed(older, []apollo.Alert{alert("gone", apollo.AlertFiring, "")}, 1, nil)
	if got, want := ids(a), "kept:firing:oscar new:firing:"; got != want {
		t.Fatalf("after an older listing: %s, want %s", got, want)
	}
	if a.Firing() != 2 {
		t.Errorf("%d firing, want 2", a.Firing())
	}
	// A listing that fails keeps what is shown.
	a.SetListed(a.BeginListing(), nil, 0, errors.New("connection refused"))
	if got, want := ids(a), "kept:firing:oscar new:firing:"; got != want {
		t.Fatalf("after a failed listing: %s, want %s", got, want)
	}
	// The next listing is the truth again.
	a.SetListed(a.BeginListing(), []apollo.Alert{alert("kept", apollo.AlertResolved, "oscar")}, 1, nil)
	if got, want := ids(a), "kept:resolved:oscar"; got != want {
		t.Fatalf("after the next listing: %s, want %s", got, want)
	}
}

// At 80 columns, task IDs that share their job name and differ in their
// timestamp stay apart: they are cut on the left, keeping the end (issue
// 21: they were cut in the middle of the timestamp and looked alike).
func TestTaskIDsKeepTheirEnd(t *testing.T) {
	t.Parallel()
	p := NewTasks(env())
	p.SetSize(80, 10)
	now := env().Now().UnixMilli()
	ids := []string{"etl_extract@20261201T200610Z#1", "etl_extract@20261201T200615Z#1", "etl_extract@20261201T200620Z#1"}
	var ts []*apollo.Task
	for _, id := range ids {
		ts = append(ts, &apollo.Task{TaskID: id, Name: "etl_extract", Status: apollo.StatusSuccess, Sequence: 3, UpdatedAt: now})
	}
	p.SetTasks(ts)
	v := ansi.Strip(p.View())
	for _, end := range []string{"200610Z#1", "200615Z#1", "200620Z#1"} {
		if !strings.Contains(v, "…"+"1201T"+end) && !strings.Contains(v, end) {
			t.Errorf("the row of %s lost its end:\n%s", end, v)
		}
	}
	if strings.Contains(v, "etl_extract@2026120…") || strings.Contains(v, "etl_extract@20261201T2006…") {
		t.Errorf("an ID is cut at its end:\n%s", v)
	}
}

// The System tab labels nested figures by their own name under a heading
// for their group: two figures of one channel no longer both read
// "channels.console.queu…" (issue 21).
func TestSystemGroupsNestedFigures(t *testing.T) {
	t.Parallel()
	p := NewSystem(env())
	p.SetSize(80, 40)
	p.SetStats([]byte(`{"notifications":{"channels":{"console":{"queueLen":0,"queued":3,"sent":3},"dingtalk":{"queued":1}},"unknownChannel":0}}`), env().Now())
	v := ansi.Strip(p.View())
	for _, want := range []string{"notifications", "  channels.console", "  channels.dingtalk", "queueLen", "queued", "unknownChannel"} {
		if !strings.Contains(v, want) {
			t.Errorf("the system tab lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "…") {
		t.Errorf("a label is cut:\n%s", v)
	}
	// The section's own figures come before its groups.
	if strings.Index(v, "unknownChannel") > strings.Index(v, "channels.console") {
		t.Errorf("the section's own figures after its groups:\n%s", v)
	}
}

// healthBoard is a board as GET /api/v1/jobs/health answers it, worst
// first.
func healthBoard(now time.Time) apiclient.HealthBoard {
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	runs := func(statuses ...apollo.Status) []apiclient.Run {
		var rs []apiclient.Run
		for i, st := range statuses {
			rs = append(rs, apiclient.Run{TaskID: fmt.Sprintf("r%d", i), Status: st, ReportedAt: ms(time.Duration(i-len(statuses)) * time.Minute)})
		}
		return rs
	}
	return apiclient.HealthBoard{Now: now.UnixMilli(), Total: 3,
		Verdicts: map[apollo.Verdict]int{apollo.VerdictFailing: 1, apollo.VerdictTimingOut: 1, apollo.VerdictOK: 1},
		Jobs: []apiclient.JobHealth{
			{Name: "batch_report", Verdict: apollo.VerdictFailing, UsualCostMs: 100, UsualEveryMs: 4000,
				LastRun:   &apiclient.Run{Status: apollo.StatusFailed, FinishedAt: ms(-40 * time.Second), CostMs: 550},
				NextRunAt: ms(4 * time.Second), LastSuccessAt: ms(-2 * time.Minute),
				Runs: runs(apollo.StatusSuccess, apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusSuccess, apollo.StatusFailed)},
			{Name: "batch_hang", Verdict: apollo.VerdictTimingOut,
				LastRun:   &apiclient.Run{Status: apollo.StatusTimeout, FinishedAt: ms(-10 * time.Minute)},
				NextRunAt: ms(-3 * time.Minute), Runs: runs(apollo.StatusTimeout, apollo.StatusTimeout)},
			{Name: "etl_load", Verdict: apollo.VerdictOK, UsualCostMs: 200, Running: 1, RunningSince: ms(-time.Second), NextRunAt: ms(300 * time.Millisecond),
				LastRun: &apiclient.Run{Status: apollo.StatusSuccess, FinishedAt: ms(-5 * time.Second), CostMs: 210},
				Runs:    runs(apollo.StatusSuccess, apollo.StatusSuccess, apollo.StatusRunning)},
		}}
}

// The health board shows the jobs worst first, as the server sorted them,
// with the verdict, last run, duration against the usual one, next run
// and the strip, newest run on the right; a job is filtered by prefix.
func TestHealthBoard(t *testing.T) {
	t.Parallel()
	p := NewHealth(env())
	p.SetSize(120, 20)
	p.SetBoard(healthBoard(env().Now()), nil)
	v := ansi.Strip(p.View())
	for _, want := range []string{
		"3 jobs · 1 failing · 1 timing out · 1 ok",
		"failing", "batch_report", "failed 40s", "550ms ×5.5", "in 4s", "▁▁█▁█",
		"timing out", "batch_hang", "timeout 10m", "3m late", "▓▓",
		"etl_load", "success 5s", "due now", "▁▁▄",
		"batch_report · last success 2m ago · usually takes 100ms, every 4.0s",
		"█ failed",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("the board lacks %q:\n%s", want, v)
		}
	}
	if !(strings.Index(v, "batch_report") < strings.Index(v, "batch_hang") && strings.Index(v, "batch_hang") < strings.Index(v, "etl_load")) {
		t.Errorf("not worst first:\n%s", v)
	}
	if p.Selected() != "batch_report" {
		t.Errorf("selected %q", p.Selected())
	}
	// enter asks for the job's metrics.
	if msg := p.Update(keyPress("enter"))(); msg != (OpenJob{Name: "batch_report"}) {
		t.Errorf("enter asked for %#v", msg)
	}
	for _, k := range []string{"/", "e", "t", "l"} {
		p.Update(keyPress(k))
	}
	if v := ansi.Strip(p.View()); strings.Contains(v, "batch_report") || !strings.Contains(v, "etl_load") {
		t.Errorf("filtered by etl:\n%s", v)
	}

	gone := NewHealth(env())
	gone.SetSize(80, 20)
	gone.SetBoard(apiclient.HealthBoard{}, &apollo.Error{Code: apollo.ENOTFOUND, Message: "not found"})
	if v := ansi.Strip(gone.View()); !strings.Contains(v, "Job health is not available on this server") {
		t.Errorf("a server without job health: %q", v)
	}
}

// keyPress is the key press Bubble Tea decodes for k.
func keyPress(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	}
	return tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
}

// A timeout is a failure on the Jobs tab: a job whose every run timed out
// fails 100% of them, in its row and the total, and is coloured as bad
// (issue 21: batch_hang showed "failed 0.0%").
func TestJobsCountTimeoutsAsFailures(t *testing.T) {
	t.Parallel()
	e := env()
	e.Styles = components.NewStyles(false)
	p := NewJobs(e)
	p.SetSize(120, 20)
	hang := apiclient.JobRow{Name: "batch_hang", Count: 2, Timeout: 2, TimeoutRate: 1}
	ok := apiclient.JobRow{Name: "etl_load", Count: 2, Success: 2}
	p.SetJobs("5m0s", apiclient.JobRow{Count: 4, Success: 2, Timeout: 2, TimeoutRate: 0.5}, []apiclient.JobRow{hang, ok}, nil)
	p.SetSeries("batch_hang", []apiclient.JobRow{{T: 1, Count: 1, Timeout: 1, TimeoutRate: 1}, {T: 2}}, nil)
	v := ansi.Strip(p.View())
	for _, want := range []string{"failed 50%", "max 100%"} {
		if !strings.Contains(v, want) {
			t.Errorf("the jobs tab lacks %q:\n%s", want, v)
		}
	}
	var row string
	for _, l := range strings.Split(v, "\n") {
		if row == "" && strings.HasPrefix(strings.TrimLeft(l, " >"), "batch_hang") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 4 || f[2] != "100%" {
		t.Errorf("batch_hang's failure rate: row %q, want 100%% in the third column", row)
	}
	bad := e.Styles.Bad.Render("x")
	for _, col := range []int{colFailed, colFailed + 1} {
		if got := p.cellStyle(0, col).Render("x"); got != bad {
			t.Errorf("batch_hang's column %d is %q, want the bad style %q", col, got, bad)
		}
		if got := p.cellStyle(1, col).Render("x"); got == bad {
			t.Errorf("etl_load's column %d is bad", col)
		}
	}
}

// listPage is what the list pages' tests use of a page.
type listPage interface {
	SetSize(int, int)
	Update(tea.KeyPressMsg) tea.Cmd
	View() string
}

// A filter being typed says what it matches and how to leave it, on every
// tab that has one: "/" alone on the Tasks tab told a newcomer nothing
// (issue 21).
func TestFilterHint(t *testing.T) {
	t.Parallel()
	tasks := NewTasks(env())
	tasks.SetTasks(nil)
	jobs := NewJobs(env())
	jobs.SetJobs("5m0s", apiclient.JobRow{}, nil, nil)
	health := NewHealth(env())
	health.SetBoard(healthBoard(env().Now()), nil)
	alerts := NewAlerts(env())
	for _, tc := range []struct {
		name string
		p    listPage
		hint string
	}{
		{"tasks", tasks, "task ID or job name"},
		{"jobs", jobs, "job name"},
		{"health", health, "job name"},
		{"alerts", alerts, "rule or group"},
	} {
		tc.p.SetSize(120, 20)
		tc.p.Update(keyPress("/"))
		v := ansi.Strip(tc.p.View())
		for _, want := range []string{"/", "filter by the start of a " + tc.hint, "enter keeps it", "esc clears it"} {
			if !strings.Contains(v, want) {
				t.Errorf("%s: the filter being typed lacks %q:\n%s", tc.name, want, v)
			}
		}
	}
}

// Every list page says why it shows no row: nothing yet, or nothing that
// starts with the filter's prefix; and a page with something under its
// table keeps that at the bottom of the screen, however short the table.
func TestListPagesSayWhyNothingShows(t *testing.T) {
	t.Parallel()
	now := env().Now()
	empty := func() []listPage {
		tasks, jobs, health, alerts := NewTasks(env()), NewJobs(env()), NewHealth(env()), NewAlerts(env())
		tasks.SetTasks(nil)
		jobs.SetJobs("5m0s", apiclient.JobRow{}, nil, nil)
		health.SetBoard(apiclient.HealthBoard{}, nil)
		alerts.SetListed(alerts.BeginListing(), nil, 0, nil)
		return []listPage{tasks, jobs, health, alerts}
	}
	full := func() []listPage {
		tasks, jobs, health, alerts := NewTasks(env()), NewJobs(env()), NewHealth(env()), NewAlerts(env())
		tasks.SetTasks([]*apollo.Task{{TaskID: "t1", Name: "etl_load", Status: apollo.StatusSuccess, UpdatedAt: now.UnixMilli()}})
		jobs.SetJobs("5m0s", apiclient.JobRow{Count: 1}, []apiclient.JobRow{{Name: "etl_load", Count: 1, Success: 1}}, nil)
		health.SetBoard(healthBoard(now), nil)
		alerts.SetListed(alerts.BeginListing(), []apollo.Alert{{ID: "a1", Rule: "etl", Group: "etl_", State: apollo.AlertFiring}}, 1, nil)
		alerts.SetSilences([]apollo.Silence{{ID: "s1", Rule: "etl", EndsAt: now.Add(time.Hour)}}, nil)
		return []listPage{tasks, jobs, health, alerts}
	}
	for i, want := range []string{
		"No tasks yet: they appear here as executors report them.",
		"No job has run in the last 5m.",
		"No job has reported a run yet: jobs appear here with their first run.",
		"No alerts.",
	} {
		p := empty()[i]
		p.SetSize(100, 20)
		if v := ansi.Strip(p.View()); !strings.Contains(v, want) {
			t.Errorf("page %d with nothing lacks %q:\n%s", i, want, v)
		}
	}
	for i, want := range []string{
		`No task or job starts with "zz".`,
		`No job starts with "zz".`,
		`No job starts with "zz".`,
		`No alert's rule or group starts with "zz".`,
	} {
		p := full()[i]
		p.SetSize(100, 20)
		for _, k := range []string{"/", "z", "z", "enter"} {
			p.Update(keyPress(k))
		}
		if v := ansi.Strip(p.View()); !strings.Contains(v, want) {
			t.Errorf("page %d filtered lacks %q:\n%s", i, want, v)
		}
	}
	// Jobs, health and alerts (with silences) fill the screen: what
	// follows their table sits on its last lines.
	for i, last := range []string{"failed", "oldest first", "etl"} {
		p := full()[i+1]
		p.SetSize(100, 20)
		lines := strings.Split(ansi.Strip(p.View()), "\n")
		if len(lines) != 20 || !strings.Contains(lines[19], last) {
			t.Errorf("page %d: %d lines, the last %q; want 20, the last with %q", i+1, len(lines), lines[len(lines)-1], last)
		}
	}
}

// An Alerts tab that holds fewer alerts than there are says how many of
// how many it shows, whether the server sent fewer (it answers at most
// 10 000) or the tab kept fewer (MaxAlerts); narrowing the list with the
// filter does not change what it says, and a listing that has them all
// takes the line away.
func TestAlertsSayHowManyOfHowManyAreShown(t *testing.T) {
	t.Parallel()
	firing := func(n int) []apollo.Alert {
		as := make([]apollo.Alert, n)
		for i := range as {
			as[i] = apollo.Alert{ID: fmt.Sprint("a", i), Rule: "each", Group: fmt.Sprintf("job_%05d", i), State: apollo.AlertFiring}
		}
		return as
	}
	a := NewAlerts(env())
	a.SetSize(120, 30)
	const note = "1 000 of 10 050 alerts shown, firing and newest first."
	a.SetListed(a.BeginListing(), firing(10_000), 10_050, nil)
	v := ansi.Strip(a.View())
	if !strings.Contains(v, note) {
		t.Fatalf("10 050 alerts, the first 10 000 listed:\n%s", v)
	}
	if got := strings.Count(v, "\n") + 1; got != 30 {
		t.Errorf("the tab is %d lines high, want 30:\n%s", got, v)
	}
	for _, k := range []string{"/", "j", "o", "b", "_", "0", "0", "0", "1", "enter"} {
		a.Update(keyPress(k))
	}
	if v := ansi.Strip(a.View()); !strings.Contains(v, note) || len(a.shown) == 0 {
		t.Errorf("filtered by job_0001 (%d rows):\n%s", len(a.shown), v)
	}
	a.SetListed(a.BeginListing(), firing(3), 3, nil)
	if v := ansi.Strip(a.View()); strings.Contains(v, " shown") {
		t.Errorf("all 3 alerts held:\n%s", v)
	}
}

// The Jobs tab counts its jobs as it counts its runs, in groups of three
// digits: "100001 jobs · 100 000 runs" read as two kinds of number.
func TestJobsCountedLikeRuns(t *testing.T) {
	t.Parallel()
	p := NewJobs(env())
	p.SetSize(120, 20)
	rows := make([]apiclient.JobRow, 1234)
	for i := range rows {
		rows[i] = apiclient.JobRow{Name: fmt.Sprintf("job%05d", i), Count: 1, Success: 1}
	}
	p.SetJobs("5m0s", apiclient.JobRow{Count: 1234, Success: 1234}, rows, nil)
	if v := ansi.Strip(p.View()); !strings.Contains(v, "1 234 jobs · 1 234 runs") {
		t.Errorf("the summary of 1 234 jobs:\n%s", strings.SplitN(v, "\n", 2)[0])
	}
}
