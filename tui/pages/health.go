package pages

import (
	"math"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

var healthColumns = []components.Column{
	{Title: "HEALTH", Min: 14, Max: 16},
	{Title: "JOB", Min: 14, Max: 32},
	{Title: "LAST RUN", Min: 11, Max: 14, Drop: 3},
	{Title: "DURATION", Min: 10, Max: 14, Drop: 2},
	{Title: "NEXT", Min: 8, Max: 10, Drop: 1},
	{Title: "RECENT RUNS", Min: 16, Max: 50, Drawn: true},
}

const (
	colVerdict  = 0
	colLastRun  = 2
	colDuration = 3
	colStrip    = 5
)

// healthPanel is the height under the table: a blank line, the selected
// job's details and the strip's legend.
const healthPanel = 3

// verdictLabels are the verdicts as people read them (docs/dashboard.md).
var verdictLabels = map[apollo.Verdict]string{
	apollo.VerdictFailing: "failing", apollo.VerdictTimingOut: "timing out", apollo.VerdictRunningLong: "running too long",
	apollo.VerdictLate: "late", apollo.VerdictNoRecentRuns: "no recent runs", apollo.VerdictOK: "ok",
}

func verdictLabel(v apollo.Verdict) string {
	if l, ok := verdictLabels[v]; ok {
		return l
	}
	return string(v)
}

var jobKey = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "job metrics"))

// Health is the job health board: every job worst first with its verdict,
// its last run, its duration against its usual one, its next run and a
// strip of its recent runs (GET /api/v1/jobs/health, docs/dashboard.md).
type Health struct {
	list
	board  apiclient.HealthBoard
	shown  []apiclient.JobHealth
	err    error // the last read failed (ENOTFOUND: the server keeps no job health)
	loaded bool
	sel    string
}

// NewHealth returns an empty Health page.
func NewHealth(env Env) *Health {
	p := &Health{list: newList(env, healthColumns, "job name")}
	p.table.Style = p.cellStyle
	return p
}

// SetBoard replaces the board, worst first as the server sorts it, or
// records why it could not be read (the old board stays on the screen).
func (p *Health) SetBoard(b apiclient.HealthBoard, err error) {
	p.err = err
	if err != nil {
		return
	}
	p.loaded, p.board = true, b
	p.refilter()
}

// Selected is the selected job's name, "" when none.
func (p *Health) Selected() string {
	if len(p.shown) == 0 {
		return ""
	}
	return p.shown[p.table.Cursor()].Name
}

func (p *Health) refilter() {
	prefix := p.filter.Value()
	var follow int
	p.shown, follow = narrow(p.shown, p.board.Jobs,
		func(j *apiclient.JobHealth) bool { return strings.HasPrefix(j.Name, prefix) },
		func(j *apiclient.JobHealth) bool { return j.Name == p.sel })
	shown, now := p.shown, p.env.Now()
	p.table.SetRowFunc(len(shown), func(i int) []string { return p.row(&shown[i], now) })
	if follow >= 0 {
		p.table.SetCursor(follow)
	}
	p.sel = p.Selected()
}

func (p *Health) row(j *apiclient.JobHealth, now time.Time) []string {
	last := "-"
	if j.LastRun != nil {
		last = j.LastRun.Status.String() + " " + components.AgoMs(now, j.LastRun.FinishedAt)
	}
	next := "-"
	if j.NextRunAt > 0 {
		switch at := time.UnixMilli(j.NextRunAt); {
		case at.Sub(now) >= time.Second:
			next = "in " + components.Ago(at, now)
		case now.Sub(at) >= time.Second:
			next = components.Ago(now, at) + " late"
		default:
			next = "due now"
		}
	}
	statuses := make([]string, len(j.Runs))
	late := make([]bool, len(j.Runs))
	for i, r := range j.Runs {
		statuses[i], late[i] = r.Status.String(), r.Late
	}
	w := components.Layout(healthColumns, p.width)[colStrip]
	return []string{verdictLabel(j.Verdict), j.Name, last, duration(j, now), next,
		components.RunStrip(p.env.Styles, statuses, late, w)}
}

// slowFactor is how many times its usual duration a run takes before its
// duration is marked (docs/dashboard.md).
const slowFactor = 2

// cost is the duration the board shows: a run going on too long, as it
// goes; else the last run's.
func cost(j *apiclient.JobHealth, now time.Time) (ms int64, ongoing bool) {
	if j.Verdict == apollo.VerdictRunningLong && j.RunningSince > 0 {
		return now.UnixMilli() - j.RunningSince, true
	}
	if j.LastRun != nil {
		return j.LastRun.CostMs, false
	}
	return 0, false
}

// duration is the cost against the usual one: "55.0s ×108" when more
// than twice as long.
func duration(j *apiclient.JobHealth, now time.Time) string {
	ms, ongoing := cost(j, now)
	if ms <= 0 {
		return "-"
	}
	s := components.Millis(float64(ms))
	if ongoing {
		s += "…"
	}
	if u := j.UsualCostMs; u > 0 && ms > slowFactor*u {
		f := float64(ms) / float64(u)
		if f >= 10 {
			f = math.Round(f)
		}
		s += " ×" + components.Number(f)
	}
	return s
}

func (p *Health) cellStyle(row, col int) lipgloss.Style {
	st := p.env.Styles
	j := &p.shown[row]
	switch col {
	case colVerdict:
		return verdictStyle(st, j.Verdict)
	case colLastRun:
		if j.LastRun != nil {
			return st.State(j.LastRun.Status.String())
		}
		return st.Muted
	case colDuration:
		if ms, _ := cost(j, p.env.Now()); j.UsualCostMs > 0 && ms > slowFactor*j.UsualCostMs {
			return st.Warn
		}
	}
	return lipgloss.NewStyle()
}

func verdictStyle(st *components.Styles, v apollo.Verdict) lipgloss.Style {
	switch v {
	case apollo.VerdictFailing, apollo.VerdictTimingOut:
		return st.Bad
	case apollo.VerdictRunningLong, apollo.VerdictLate, apollo.VerdictNoRecentRuns:
		return st.Warn
	case apollo.VerdictOK:
		return st.Good
	}
	return lipgloss.NewStyle()
}

// SetSize implements the dashboard's page.
func (p *Health) SetSize(width, height int) { p.fit(width, height, healthPanel) }

// Update implements the dashboard's page.
func (p *Health) Update(msg tea.KeyPressMsg) tea.Cmd {
	if cmd, ok := filterKeys(&p.filter, msg, p.refit); ok {
		return cmd
	}
	switch {
	case navigate(&p.table, msg):
		p.sel = p.Selected()
	case key.Matches(msg, jobKey):
		if name := p.Selected(); name != "" {
			return intent(OpenJob{Name: name})
		}
	}
	return nil
}

// refit lists the jobs of the filter in the room it leaves.
func (p *Health) refit() {
	p.refilter()
	p.SetSize(p.width, p.height)
}

// Keys implements the dashboard's page.
func (p *Health) Keys(full bool) []key.Binding {
	return withMoves(full, listKeys.Filter, jobKey, listKeys.Back)
}

// View implements the dashboard's page.
func (p *Health) View() string {
	st := p.env.Styles
	switch {
	case p.err != nil && apollo.ErrorCode(p.err) == apollo.ENOTFOUND && !p.loaded:
		return st.Muted.Render("Job health is not available on this server (GET /api/v1/jobs/health answers 404).")
	case !p.loaded && p.err != nil:
		return st.Bad.Render("Could not load the job health: " + components.EscapeLine(p.err.Error(), p.width))
	case !p.loaded:
		return st.Muted.Render("Loading the job health…")
	}
	lines := p.lines(p.summary(), len(p.shown), "No job has reported a run yet: jobs appear here with their first run.", "No job")
	if len(p.shown) == 0 {
		return strings.Join(lines, "\n")
	}
	lines = append(p.pad(lines, p.table.Len()), "", p.detail(), p.env.Styles.Truncate(st.Muted.Render("oldest first: ")+components.RunLegend(st), p.width))
	return strings.Join(lines, "\n")
}

// summary counts the jobs by verdict, worst first, as the server counted
// every job (not only those on the board).
func (p *Health) summary() string {
	st := p.env.Styles
	b := &p.board
	parts := []string{st.Bold.Render(components.Count(int64(b.Total))) + " jobs"}
	for _, v := range apollo.Verdicts() {
		if n := b.Verdicts[v]; n > 0 {
			parts = append(parts, verdictStyle(st, v).Render(components.Count(int64(n))+" "+verdictLabel(v)))
		}
	}
	if b.Total > len(b.Jobs) {
		parts = append(parts, st.Muted.Render("the "+strconv.Itoa(len(b.Jobs))+" worst shown"))
	}
	if p.err != nil {
		parts = append(parts, st.Bad.Render("refresh failed: "+components.EscapeLine(p.err.Error(), p.width)))
	}
	return p.env.Styles.Truncate(strings.Join(parts, st.Muted.Render(" · ")), p.width)
}

// detail is the selected job's habits: when it last succeeded, its usual
// duration and interval, what runs now.
func (p *Health) detail() string {
	st := p.env.Styles
	j := &p.shown[p.table.Cursor()]
	now := p.env.Now()
	parts := []string{st.Bold.Render(components.EscapeLine(j.Name, p.width))}
	if j.LastSuccessAt > 0 {
		parts = append(parts, "last success "+components.AgoMs(now, j.LastSuccessAt)+" ago")
	} else {
		parts = append(parts, "no success yet")
	}
	var usual []string
	if j.UsualCostMs > 0 {
		usual = append(usual, "takes "+components.Millis(float64(j.UsualCostMs)))
	}
	if j.UsualEveryMs > 0 {
		usual = append(usual, "every "+components.Millis(float64(j.UsualEveryMs)))
	}
	if len(usual) > 0 {
		parts = append(parts, "usually "+strings.Join(usual, ", "))
	}
	if j.Running > 0 {
		r := components.Count(j.Running) + " running"
		if j.RunningSince > 0 {
			r += " for " + components.AgoMs(now, j.RunningSince)
		}
		parts = append(parts, r)
	}
	return p.env.Styles.Truncate(strings.Join(parts, st.Muted.Render(" · ")), p.width)
}
