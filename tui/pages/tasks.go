package pages

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/components"
)

var taskColumns = []components.Column{
	{Title: "STATUS", Min: 9, Max: 14},
	{Title: "TASK", Min: 22, Max: 48, KeepEnd: true},
	{Title: "JOB", Min: 14, Max: 28, Drop: 2},
	{Title: "UPDATED", Min: 7, Right: true},
	{Title: "COST", Min: 7, Right: true, Drop: 1},
	{Title: "LATE", Min: 4, Drop: 3},
	{Title: "SEQ", Min: 5, Right: true, Drop: 4},
	{Title: "STARTED", Min: 7, Right: true, Drop: 5},
}

const (
	colStatus = 0
	colCost   = 4
	colLate   = 5
)

var openKey = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "timeline"))

// Tasks is the live list of tasks, newest first, with a prefix filter and
// a task's timeline on enter.
type Tasks struct {
	list
	all    []*apollo.Task
	shown  []*apollo.Task
	sel    string // the selected task ID, followed across updates
	detail *taskDetail
}

// NewTasks returns an empty Tasks page.
func NewTasks(env Env) *Tasks {
	p := &Tasks{list: newList(env, taskColumns, "task ID or job name")}
	p.table.Style = p.cellStyle
	return p
}

// SetTasks replaces the list (in display order: newest first). The page
// reads ts until the next SetTasks; the caller must not change it before.
func (p *Tasks) SetTasks(ts []*apollo.Task) {
	p.all = ts
	p.refilter()
}

// refilter applies the filter as typed, so the list narrows at once; the
// dashboard also asks the stream for the prefix when the typing ends.
func (p *Tasks) refilter() {
	prefix := p.filter.Value()
	if prefix == "" {
		p.shown = p.all // no copy: the list is the caller's until the next SetTasks
	} else {
		p.shown = make([]*apollo.Task, 0, len(p.shown))
		for _, t := range p.all {
			if strings.HasPrefix(t.Name, prefix) || strings.HasPrefix(t.TaskID, prefix) {
				p.shown = append(p.shown, t)
			}
		}
	}
	now := p.env.Now()
	shown := p.shown
	p.table.SetRowFunc(len(shown), func(i int) []string { return taskRow(shown[i], now) })
	if i := slices.IndexFunc(p.shown, func(t *apollo.Task) bool { return t.TaskID == p.sel }); i >= 0 {
		p.table.SetCursor(i)
	}
	p.remember()
}

func (p *Tasks) remember() {
	if t, ok := p.Selected(); ok {
		p.sel = t.TaskID
	}
}

func taskRow(t *apollo.Task, now time.Time) []string {
	cost := "-"
	switch {
	case t.CostMs > 0:
		cost = components.Millis(float64(t.CostMs))
	case t.Status == apollo.StatusRunning && t.StartedAt > 0:
		cost = components.Millis(float64(now.UnixMilli()-t.StartedAt)) + "…"
	}
	late := ""
	if t.Late {
		late = "late"
	}
	return []string{
		t.Status.String(), t.TaskID, t.Name,
		components.AgoMs(now, t.UpdatedAt), cost, late,
		strconv.FormatInt(t.Sequence, 10), components.AgoMs(now, t.StartedAt),
	}
}

func (p *Tasks) cellStyle(row, col int) lipgloss.Style {
	st := p.env.Styles
	switch col {
	case colStatus:
		return st.State(p.shown[row].Status.String())
	case colLate:
		return st.Warn
	case colCost:
		if p.shown[row].CostMs == 0 {
			return st.Muted
		}
	}
	return lipgloss.NewStyle()
}

// Selected returns the selected task.
func (p *Tasks) Selected() (apollo.Task, bool) {
	if len(p.shown) == 0 {
		return apollo.Task{}, false
	}
	return *p.shown[p.table.Cursor()], true
}

// Filter is the prefix in force.
func (p *Tasks) Filter() string { return p.filter.Value() }

// ShowTask fills the open timeline with a task from the API, or the error.
func (p *Tasks) ShowTask(t apollo.Task, err error) {
	if p.detail == nil || p.detail.id != t.TaskID {
		return
	}
	p.detail.set(&t, err, p.env)
}

// Detail reports which task's timeline is open ("" for none).
func (p *Tasks) Detail() string {
	if p.detail == nil {
		return ""
	}
	return p.detail.id
}

// SetSize implements the dashboard's page.
func (p *Tasks) SetSize(width, height int) {
	p.fit(width, height, 0)
	if p.detail != nil {
		p.detail.setSize(width, height, p.env)
	}
}

// Update implements the dashboard's page.
func (p *Tasks) Update(msg tea.KeyPressMsg) tea.Cmd {
	if p.detail != nil {
		if key.Matches(msg, listKeys.Back) {
			p.detail = nil
			return nil
		}
		p.detail.scroll(msg)
		return nil
	}
	if p.filter.Active() {
		before := p.filter.Value()
		done, cmd := p.filter.Update(msg)
		if p.filter.Value() != before {
			p.refilter()
		}
		p.SetSize(p.width, p.height)
		if done {
			return tea.Batch(cmd, intent(FilterTasks{Prefix: p.filter.Value()}))
		}
		return cmd
	}
	switch {
	case navigate(&p.table, msg):
		p.remember()
	case key.Matches(msg, listKeys.Filter):
		cmd := p.filter.Start()
		p.SetSize(p.width, p.height)
		return cmd
	case key.Matches(msg, listKeys.Back):
		if p.filter.Value() != "" {
			p.filter.Clear()
			p.refilter()
			p.SetSize(p.width, p.height)
			return intent(FilterTasks{})
		}
	case key.Matches(msg, openKey):
		if t, ok := p.Selected(); ok {
			p.detail = &taskDetail{id: t.TaskID}
			p.detail.set(&t, nil, p.env)
			p.detail.loading = true
			p.detail.setSize(p.width, p.height, p.env)
			return intent(OpenTask{ID: t.TaskID})
		}
	}
	return nil
}

// Keys implements the dashboard's page.
func (p *Tasks) Keys(full bool) []key.Binding {
	if p.detail != nil {
		return []key.Binding{moveHelp, listKeys.Back}
	}
	return withMoves(full, listKeys.Filter, openKey, listKeys.Back)
}

// View implements the dashboard's page.
func (p *Tasks) View() string {
	if p.detail != nil {
		return p.detail.view(p.env)
	}
	return strings.Join(p.lines(p.summary(), len(p.shown), "No tasks yet: they appear here as executors report them.", "No task or job"), "\n")
}

// summary counts the listed tasks by status.
func (p *Tasks) summary() string {
	var n [8]int
	for i := range p.shown {
		if s := p.shown[i].Status; int(s) < len(n) {
			n[s]++
		}
	}
	st := p.env.Styles
	parts := []string{st.Bold.Render(strconv.Itoa(len(p.shown))) + " tasks"}
	for _, s := range apollo.Statuses() {
		if n[s] > 0 {
			parts = append(parts, st.State(s.String()).Render(s.String()+" "+strconv.Itoa(n[s])))
		}
	}
	return p.env.Styles.Truncate(strings.Join(parts, st.Muted.Render(" · ")), p.width)
}
