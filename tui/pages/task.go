package pages

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/components"
)

// taskDetail is one task's fields and its timeline: every record in its
// history, reports and the server's own (corrections, timeouts, missed
// starts).
type taskDetail struct {
	id      string
	task    *apollo.Task
	err     error
	loading bool
	vp      viewport.Model
	width   int
}

var timelineColumns = []components.Column{
	{Title: "TIME", Min: 12},
	{Title: "KIND", Min: 12},
	{Title: "STATUS", Min: 14},
	{Title: "SEQ", Min: 5, Right: true},
	{Title: "BY / REASON", Min: 12, Max: -1},
}

func (d *taskDetail) set(t *apollo.Task, err error, env Env) {
	d.loading = false
	d.err = err
	if err == nil {
		d.task = t
	}
	d.render(env)
}

func (d *taskDetail) setSize(width, height int, env Env) {
	if d.vp.Width() == 0 {
		d.vp = viewport.New()
	}
	d.width = width
	d.vp.SetWidth(width)
	d.vp.SetHeight(max(height-1, 1))
	d.render(env)
}

func (d *taskDetail) scroll(msg tea.KeyPressMsg) {
	d.vp, _ = d.vp.Update(msg)
}

func (d *taskDetail) view(env Env) string {
	st := env.Styles
	title := st.Bold.Render("Task "+components.Escape(d.id)) + st.Muted.Render("  (esc to go back)")
	return env.Styles.Truncate(title, d.width) + "\n" + d.vp.View()
}

// render lays the detail out for the current width.
func (d *taskDetail) render(env Env) {
	if d.width == 0 {
		return
	}
	st := env.Styles
	var lines []string
	switch {
	case d.err != nil:
		lines = append(lines, st.Bad.Render("Could not load the task: "+components.Escape(d.err.Error())))
	case d.loading && d.task == nil:
		lines = append(lines, st.Muted.Render("Loading…"))
	}
	if t := d.task; t != nil {
		lines = append(lines, d.fields(t, env)...)
		lines = append(lines, "")
		switch {
		case len(t.History) > 0:
			lines = append(lines, st.Bold.Render("Timeline"))
			lines = append(lines, d.timeline(t, env))
		case d.loading:
			lines = append(lines, st.Muted.Render("Loading the timeline…"))
		default:
			lines = append(lines, st.Muted.Render("No history kept for this task."))
		}
	}
	d.vp.SetContent(strings.Join(lines, "\n"))
}

func (d *taskDetail) fields(t *apollo.Task, env Env) []string {
	st := env.Styles
	now := env.Now()
	field := func(name, value string) string { return st.Muted.Render(name+" ") + value }
	at := func(ms int64) string {
		if ms == 0 {
			return "-"
		}
		return clockTime(ms, now) + " (" + components.AgoMs(now, ms) + " ago)"
	}
	late := "no"
	if t.Late {
		late = st.Warn.Render("yes")
	}
	row := func(parts ...string) string {
		return env.Styles.Truncate(strings.Join(parts, "   "), d.width)
	}
	return []string{
		row(field("job", components.Escape(t.Name)), field("status", st.State(t.Status.String()).Render(t.Status.String())),
			field("sequence", strconv.FormatInt(t.Sequence, 10)), field("late", late)),
		row(field("scheduled", at(t.ScheduledAt)), field("started", at(t.StartedAt))),
		row(field("finished", at(t.FinishedAt)), field("updated", at(t.UpdatedAt))),
		row(field("cost", components.Millis(float64(t.CostMs))), field("timeout", components.Millis(float64(t.TimeoutMs)))),
	}
}

func (d *taskDetail) timeline(t *apollo.Task, env Env) string {
	now := env.Now()
	rows := make([][]string, len(t.History))
	for i := range t.History {
		r := &t.History[i]
		by := r.Actor
		if r.Reason != "" {
			by = strings.TrimSpace(by + ": " + r.Reason)
		}
		rows[i] = []string{clockTime(r.Ts, now), r.Kind.String(), r.Status.String(),
			strconv.FormatInt(r.Sequence, 10), by}
	}
	tbl := components.Table{Columns: timelineColumns, Plain: true,
		Style: func(row, col int) lipgloss.Style {
			if col == 2 {
				return env.Styles.State(t.History[row].Status.String())
			}
			return lipgloss.NewStyle()
		}}
	tbl.SetSize(d.width, len(rows)+1)
	tbl.SetRows(rows)
	out := tbl.View(env.Styles)
	// Extra is free-form and can be long: it gets lines of its own,
	// wrapped, rather than a column that would cut it.
	for i := range t.History {
		if r := &t.History[i]; len(r.Extra) > 0 && string(r.Extra) != "null" {
			if !strings.Contains(out, "\nExtra") {
				out += "\n\n" + env.Styles.Bold.Render("Extra")
			}
			head := env.Styles.Muted.Render("seq " + strconv.FormatInt(r.Sequence, 10) + " " + r.Status.String() + ":")
			out += "\n" + head + "\n" + indent(env.Styles.Wrap(extraText(r.Extra), max(d.width-2, 10)), "  ")
		}
	}
	return out
}

// extraText is a record's extra as one line of JSON, escaped: the
// reporter chose every byte of it.
func extraText(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return components.Escape(string(raw))
	}
	return components.Escape(b.String())
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}

// clockTime shows a time of day in now's location, with the date when it
// is not today's.
func clockTime(ms int64, now time.Time) string {
	t := time.UnixMilli(ms).In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("01-02 15:04:05")
}
