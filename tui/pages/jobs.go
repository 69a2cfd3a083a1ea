package pages

import (
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

var jobColumns = []components.Column{
	{Title: "JOB", Min: 12, Max: 32},
	{Title: "RUNS", Min: 6, Right: true},
	{Title: "FAIL%", Min: 7, Right: true},
	{Title: "TIMEOUT", Min: 7, Right: true, Drop: 3},
	{Title: "LATE", Min: 6, Right: true, Drop: 4},
	{Title: "AVG COST", Min: 8, Right: true, Drop: 2},
	{Title: "MAX COST", Min: 8, Right: true, Drop: 5},
	{Title: "RUNS/MIN", Min: 8, Right: true, Drop: 6},
	{Title: "RUNNING", Min: 7, Right: true, Drop: 7},
	{Title: "BACKLOG", Min: 7, Right: true, Drop: 1},
}

// colFailed is the failure rate's column (failed and timed out), the
// timeout rate's follows.
const colFailed = 2

// panelLines is the height of the selected job's sparklines under the
// table: a blank line, a title and two charts.
const panelLines = 4

// Jobs lists every job's metrics over the window, and the selected job's
// runs and failure rate over the last hour as sparklines.
type Jobs struct {
	list
	window string
	total  apiclient.JobRow
	all    []apiclient.JobRow
	shown  []apiclient.JobRow
	err    error // the last listing failed (ENOTFOUND: the server keeps no metrics)
	loaded bool
	sel    string

	seriesFor string
	series    []apiclient.JobRow
	seriesErr error
}

// NewJobs returns an empty Jobs page.
func NewJobs(env Env) *Jobs {
	p := &Jobs{list: newList(env, jobColumns, "job name")}
	p.table.Style = p.cellStyle
	return p
}

// SetJobs replaces the listing, or records why it failed (the old rows
// stay on the screen then).
func (p *Jobs) SetJobs(window string, total apiclient.JobRow, jobs []apiclient.JobRow, err error) {
	p.err = err
	if err != nil {
		return
	}
	p.loaded = true
	p.window, p.total, p.all = window, total, jobs
	p.refilter()
}

// SetSeries sets the selected job's series (points every minute).
func (p *Jobs) SetSeries(name string, points []apiclient.JobRow, err error) {
	p.seriesFor, p.series, p.seriesErr = name, points, err
}

// Selected is the selected job's name, "" when none.
func (p *Jobs) Selected() string {
	if len(p.shown) == 0 {
		return ""
	}
	return p.shown[p.table.Cursor()].Name
}

// Select selects the job called name, dropping the filter when it hides
// the job. It reports whether the job is listed: one with no run in the
// window is not.
func (p *Jobs) Select(name string) bool {
	p.sel = name
	p.refilter()
	if p.Selected() != name && p.filter.Value() != "" && slices.ContainsFunc(p.all, func(j apiclient.JobRow) bool { return j.Name == name }) {
		p.filter.Clear()
		p.sel = name // the listing under the filter moved it
		p.refit()
	}
	return p.Selected() == name
}

func (p *Jobs) refilter() {
	prefix := p.filter.Value()
	var follow int
	p.shown, follow = narrow(p.shown, p.all,
		func(j *apiclient.JobRow) bool { return strings.HasPrefix(j.Name, prefix) },
		func(j *apiclient.JobRow) bool { return j.Name == p.sel })
	rows := make([][]string, len(p.shown))
	for i, j := range p.shown {
		rows[i] = []string{j.Name, components.Count(j.Count), rate(j.FailureRate(), j.Count),
			rate(j.TimeoutRate, j.Count), rate(j.LateRate, j.Due),
			components.Millis(j.AvgCostMs), components.Millis(float64(j.MaxCostMs)),
			components.Number(j.Throughput), components.Count(j.Running), components.Count(j.Backlog)}
	}
	p.table.SetRows(rows)
	if follow >= 0 {
		p.table.SetCursor(follow)
	}
	p.sel = p.Selected()
}

// rate shows a ratio, or "-" when its denominator is zero.
func rate(r float64, of int64) string {
	if of == 0 {
		return "-"
	}
	return components.Percent(r)
}

// cellStyle colours the failure rate when a run failed or timed out, and
// the timeout rate when one timed out.
func (p *Jobs) cellStyle(row, col int) lipgloss.Style {
	j := p.shown[row]
	if (col == colFailed && j.Failed+j.Timeout > 0) || (col == colFailed+1 && j.Timeout > 0) {
		return p.env.Styles.Bad
	}
	return lipgloss.NewStyle()
}

// SetSize implements the dashboard's page.
func (p *Jobs) SetSize(width, height int) { p.fit(width, height, panelLines) }

// Update implements the dashboard's page.
func (p *Jobs) Update(msg tea.KeyPressMsg) tea.Cmd {
	if cmd, ok := filterKeys(&p.filter, msg, p.refit); ok {
		return cmd
	}
	if navigate(&p.table, msg) {
		p.sel = p.Selected()
	}
	return nil
}

// refit lists the jobs of the filter in the room it leaves.
func (p *Jobs) refit() {
	p.refilter()
	p.SetSize(p.width, p.height)
}

// Keys implements the dashboard's page.
func (p *Jobs) Keys(full bool) []key.Binding { return withMoves(full, listKeys.Filter, listKeys.Back) }

// View implements the dashboard's page.
func (p *Jobs) View() string {
	st := p.env.Styles
	switch {
	case p.err != nil && apollo.ErrorCode(p.err) == apollo.ENOTFOUND:
		return st.Muted.Render("Job metrics are not available on this server (GET /api/v1/metrics answers 404).")
	case !p.loaded && p.err != nil:
		return st.Bad.Render("Could not load the job metrics: " + components.EscapeLine(p.err.Error(), p.width))
	case !p.loaded:
		return st.Muted.Render("Loading the job metrics…")
	}
	lines := p.lines(p.summary(), len(p.shown), "No job has run in the last "+components.Span(p.window)+".", "No job")
	if len(p.shown) == 0 {
		return strings.Join(lines, "\n")
	}
	// Keep the sparklines at the bottom when the table is short.
	lines = append(p.pad(lines, p.table.Len()), "", p.panel())
	return strings.Join(lines, "\n")
}

func (p *Jobs) summary() string {
	st := p.env.Styles
	t := p.total
	parts := []string{
		"window " + st.Bold.Render(components.Span(p.window)),
		st.Bold.Render(components.Count(int64(len(p.shown)))) + " jobs",
		st.Bold.Render(components.Count(t.Count)) + " runs",
		"failed " + st.Bold.Render(rate(t.FailureRate(), t.Count)),
		"running " + st.Bold.Render(components.Count(t.Running)),
		"backlog " + st.Bold.Render(components.Count(t.Backlog)),
	}
	if p.err != nil {
		parts = append(parts, st.Bad.Render("refresh failed: "+components.EscapeLine(p.err.Error(), p.width)))
	}
	return p.env.Styles.Truncate(strings.Join(parts, st.Muted.Render(" · ")), p.width)
}

// panel draws the selected job's last hour.
func (p *Jobs) panel() string {
	st := p.env.Styles
	name := p.Selected()
	title := st.Bold.Render(components.EscapeLine(name, p.width)) + st.Muted.Render(" · last hour, one bar a minute")
	var runs, failed string
	switch {
	case p.seriesFor != name || (p.series == nil && p.seriesErr == nil):
		runs = st.Muted.Render("loading…")
	case p.seriesErr != nil:
		runs = st.Muted.Render("no series: " + components.EscapeLine(p.seriesErr.Error(), p.width))
	default:
		runs, failed = p.sparks()
	}
	return p.env.Styles.Truncate(title, p.width) + "\n" +
		p.env.Styles.Truncate(st.Muted.Render("runs    ")+runs, p.width) + "\n" +
		p.env.Styles.Truncate(st.Muted.Render("failed  ")+failed, p.width)
}

func (p *Jobs) sparks() (runs, failed string) {
	counts := make([]float64, len(p.series))
	rates := make([]float64, len(p.series))
	var maxRuns, maxRate float64
	for i, pt := range p.series {
		counts[i] = float64(pt.Count)
		rates[i] = math.NaN() // no runs: no rate, a blank
		if pt.Count > 0 {
			rates[i] = pt.FailureRate()
			maxRate = max(maxRate, rates[i])
		}
		maxRuns = max(maxRuns, counts[i])
	}
	w := max(p.width-8-16, 8)
	bad := p.env.Styles.Bad
	if maxRate == 0 {
		bad = p.env.Styles.Good
	}
	runs = components.Sparkline(counts, w, 0) + p.env.Styles.Muted.Render("  max "+components.Number(maxRuns)+"/min")
	failed = bad.Render(components.Sparkline(rates, w, 1)) + p.env.Styles.Muted.Render("  max "+components.Percent(maxRate))
	return runs, failed
}
