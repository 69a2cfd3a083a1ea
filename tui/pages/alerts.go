package pages

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/components"
)

var alertColumns = []components.Column{
	{Title: "STATE", Min: 8},
	{Title: "SEVERITY", Min: 8, Drop: 3},
	{Title: "RULE", Min: 12, Max: 20},
	{Title: "GROUP", Min: 10, Max: 16, Drop: 2},
	{Title: "SINCE", Min: 5, Right: true},
	{Title: "ACKED BY", Min: 8, Max: 12, Drop: 4},
	{Title: "SUMMARY", Min: 30, Max: -1},
}

const colSeverity = 1

var (
	ackKey     = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "acknowledge"))
	silenceKey = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "silence"))
)

// MaxAlerts bounds the alerts kept: the newest resolved ones go first.
const MaxAlerts = 1000

// Alerts lists firing, pending and resolved alerts (listed once from the
// API, then live from the stream), acknowledges and silences them, and
// shows the silences in force.
type Alerts struct {
	list
	byID  map[string]apollo.Alert
	shown []apollo.Alert
	sel   string

	// listings counts the listings asked for (BeginListing); changedAt
	// holds, for each alert the stream changed, how many had been asked
	// for then: a listing asked for before a change may answer the alert
	// as it was before it. applied is the newest listing applied.
	listings, applied int
	changedAt         map[string]int

	// unlisted counts the alerts the last listing had but did not send
	// (the server answers at most 10 000), dropped those that MaxAlerts
	// cut since, and total those and the alerts held: the alerts there
	// are, as of the last listing and the stream's changes since.
	unlisted, dropped, total int

	listErr     error // listing failed; ENOTFOUND: the server has no alert routes
	silences    []apollo.Silence
	silencesErr error
	form        *silenceForm
}

// NewAlerts returns an empty Alerts page.
func NewAlerts(env Env) *Alerts {
	p := &Alerts{list: newList(env, alertColumns, "rule or group"), byID: map[string]apollo.Alert{}, changedAt: map[string]int{}}
	p.table.Style = p.cellStyle
	return p
}

// BeginListing is called as GET /api/v1/alerts is sent; SetListed takes
// the number it returns with the answer.
func (p *Alerts) BeginListing() int {
	p.listings++
	return p.listings
}

// SetListed replaces the alerts with those that listing n returned: the
// server's list is the truth, and an alert it no longer has (it went
// inactive, or was forgotten while the stream was down) goes. The alerts
// the stream changed after the listing was asked for stay as the stream
// said, and an answer older than one already applied is ignored. total is
// how many alerts the server has, of which it sent as. When the listing
// failed, the alerts held stay and the error is kept.
func (p *Alerts) SetListed(n int, as []apollo.Alert, total int, err error) {
	if n < p.applied {
		return
	}
	p.listErr = err
	if err == nil {
		p.applied = n
		p.unlisted, p.dropped = max(total-len(as), 0), 0
		next := make(map[string]apollo.Alert, len(as))
		for _, a := range as {
			next[a.ID] = a
		}
		for id, at := range p.changedAt {
			switch a, ok := p.byID[id]; {
			case at < n:
				delete(p.changedAt, id) // the listing has it as it is
			case ok:
				next[id] = a
			default:
				delete(next, id) // gone inactive since
			}
		}
		p.byID = next
	}
	p.relist()
}

// Upsert adds or replaces one alert, as the stream sends it. An inactive
// alert (a pending one whose condition ended) is forgotten by the server,
// and here.
func (p *Alerts) Upsert(a apollo.Alert) {
	p.changedAt[a.ID] = p.listings
	if a.State == apollo.AlertInactive {
		delete(p.byID, a.ID)
	} else {
		p.byID[a.ID] = a
	}
	p.relist()
}

// relist lists the alerts again after they changed, making room for the
// line that says how many are not held when it comes or goes.
func (p *Alerts) relist() {
	cut := p.cut()
	p.refresh()
	if p.cut() != cut {
		p.SetSize(p.width, p.height)
	}
}

// cut reports whether there are more alerts than are held.
func (p *Alerts) cut() bool { return p.total > len(p.byID) }

// SetSilences replaces the silences in force, or keeps why listing them
// failed.
func (p *Alerts) SetSilences(ss []apollo.Silence, err error) {
	p.silences, p.silencesErr = ss, err
	p.SetSize(p.width, p.height)
}

// Firing counts the firing alerts, for the tab's title.
func (p *Alerts) Firing() int {
	n := 0
	for _, a := range p.byID {
		if a.State == apollo.AlertFiring {
			n++
		}
	}
	return n
}

func (p *Alerts) refresh() {
	all := make([]apollo.Alert, 0, len(p.byID))
	for _, a := range p.byID {
		all = append(all, a)
	}
	slices.SortFunc(all, func(a, b apollo.Alert) int { return apollo.CompareAlerts(&a, &b) })
	if len(all) > MaxAlerts { // the oldest resolved ones sort last
		p.dropped += len(all) - MaxAlerts
		for _, a := range all[MaxAlerts:] {
			delete(p.byID, a.ID)
		}
		all = all[:MaxAlerts]
	}
	p.total = len(all) + p.unlisted + p.dropped
	prefix := p.filter.Value()
	var follow int
	p.shown, follow = narrow(p.shown, all,
		func(a *apollo.Alert) bool {
			return strings.HasPrefix(a.Rule, prefix) || strings.HasPrefix(a.Group, prefix)
		},
		func(a *apollo.Alert) bool { return a.ID == p.sel })
	now := p.env.Now()
	rows := make([][]string, len(p.shown))
	for i := range p.shown {
		a := &p.shown[i]
		acked := a.AckedBy
		if acked == "" {
			acked = "-"
		}
		rows[i] = []string{string(a.State), string(a.Severity), a.Rule, a.Group,
			components.Ago(now, a.Since()), acked, a.Summary}
	}
	p.table.SetRows(rows)
	if follow >= 0 {
		p.table.SetCursor(follow)
	}
	if a, ok := p.Selected(); ok {
		p.sel = a.ID
	}
}

func (p *Alerts) cellStyle(row, col int) lipgloss.Style {
	switch col {
	case colStatus:
		return p.env.Styles.State(string(p.shown[row].State))
	case colSeverity:
		return p.env.Styles.State(string(p.shown[row].Severity))
	}
	return lipgloss.NewStyle()
}

// Selected returns the selected alert.
func (p *Alerts) Selected() (apollo.Alert, bool) {
	if len(p.shown) == 0 {
		return apollo.Alert{}, false
	}
	return p.shown[p.table.Cursor()], true
}

// CloseForm closes the silence form (after the silence was made).
func (p *Alerts) CloseForm() {
	p.form = nil
	p.SetSize(p.width, p.height)
}

// FormError shows why the silence could not be made, keeping the form.
// The reason quotes the server (or a proxy's plain-text answer): escaped.
func (p *Alerts) FormError(err error) {
	if p.form != nil {
		p.form.err = components.EscapeLine(err.Error(), p.width)
	}
}

// silenceLines is how many lines the silences get under the table.
func (p *Alerts) silenceLines() int {
	if len(p.silences) == 0 && p.silencesErr == nil {
		return 0
	}
	return min(len(p.silences), max(p.height/5, 1)) + 2 // blank line and title
}

// SetSize implements the dashboard's page.
func (p *Alerts) SetSize(width, height int) {
	p.width, p.height = width, height // silenceLines reads the height
	foot := p.silenceLines()
	if p.form != nil {
		foot = formLines
		p.form.setWidth(width)
	}
	if p.listErr != nil {
		foot++ // the line that says why, over the filter
	}
	if p.cut() {
		foot++ // the line that says how many are not held
	}
	p.fit(width, height, foot)
}

// Typing implements the dashboard's page.
func (p *Alerts) Typing() bool { return p.filter.Active() || p.form != nil }

// Update implements the dashboard's page.
func (p *Alerts) Update(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case p.form != nil:
		submit, cancel, cmd := p.form.update(msg)
		switch {
		case cancel:
			p.CloseForm()
		case submit != nil:
			return intent(*submit)
		}
		return cmd
	}
	if cmd, ok := filterKeys(&p.filter, msg, p.refit); ok {
		return cmd
	}
	switch {
	case navigate(&p.table, msg):
		if a, ok := p.Selected(); ok {
			p.sel = a.ID
		}
	case key.Matches(msg, ackKey):
		if a, ok := p.Selected(); ok {
			return intent(AckAlert{Alert: a})
		}
	case key.Matches(msg, silenceKey):
		if a, ok := p.Selected(); ok {
			p.form = newSilenceForm(a, p.env.Styles)
			p.SetSize(p.width, p.height)
			return p.form.focus()
		}
	}
	return nil
}

// refit lists the alerts of the filter in the room it leaves.
func (p *Alerts) refit() {
	p.refresh()
	p.SetSize(p.width, p.height)
}

// Keys implements the dashboard's page.
func (p *Alerts) Keys(full bool) []key.Binding {
	if p.form != nil {
		return formKeys()
	}
	return withMoves(full, ackKey, silenceKey, listKeys.Filter, listKeys.Back)
}

// View implements the dashboard's page.
func (p *Alerts) View() string {
	head := p.summary()
	if p.cut() {
		// As apollo alerts says it: the rest are neither listed nor
		// counted above.
		msg := components.Count(int64(len(p.byID))) + " of " + components.Count(int64(p.total)) + " alerts shown, firing and newest first."
		head += "\n" + p.env.Styles.Truncate(p.env.Styles.Muted.Render(msg), p.width)
	}
	if p.listErr != nil {
		msg := "Could not list past alerts: " + components.EscapeLine(p.listErr.Error(), p.width) + "; new alerts appear here live."
		if apollo.ErrorCode(p.listErr) == apollo.ENOTFOUND {
			msg = "This server cannot list past alerts; new ones appear here live."
		}
		head += "\n" + p.env.Styles.Truncate(p.env.Styles.Muted.Render(msg), p.width)
	}
	lines := p.lines(head, len(p.shown), "No alerts.", "No alert's rule or group")
	if p.form != nil {
		return strings.Join(lines, "\n") + "\n" + p.form.view()
	}
	if n := p.silenceLines(); n > 0 {
		lines = append(p.pad(lines, max(p.table.Len(), 1)), "", p.silenceView(n-2))
	}
	return strings.Join(lines, "\n")
}

func (p *Alerts) summary() string {
	st := p.env.Styles
	n := map[apollo.AlertState]int{}
	for _, a := range p.byID {
		n[a.State]++
	}
	parts := []string{
		st.State("firing").Render("firing " + strconv.Itoa(n[apollo.AlertFiring])),
		st.State("pending").Render("pending " + strconv.Itoa(n[apollo.AlertPending])),
		"resolved " + strconv.Itoa(n[apollo.AlertResolved]),
	}
	return p.env.Styles.Truncate(strings.Join(parts, st.Muted.Render(" · ")), p.width)
}

func (p *Alerts) silenceView(rows int) string {
	st := p.env.Styles
	if p.silencesErr != nil {
		msg := "Silences: could not list them: " + components.EscapeLine(p.silencesErr.Error(), p.width)
		if apollo.ErrorCode(p.silencesErr) == apollo.ENOTFOUND {
			msg = "Silences are not available on this server."
		}
		return st.Muted.Render(p.env.Styles.Truncate(msg, p.width))
	}
	now := p.env.Now()
	lines := []string{st.Bold.Render("Silences (" + strconv.Itoa(len(p.silences)) + ")")}
	for i, s := range p.silences {
		if i == rows {
			break
		}
		// Each cut to the line before it is escaped: a server's text of a
		// megabyte costs the line no more (TestHugeAlertTextCostsTheScreenNoMore).
		text := func(s string) string { return components.EscapeLine(s, p.width) }
		what := "rule " + text(cmp.Or(s.Rule, "any")) + ", prefix " + text(cmp.Or(s.Prefix, "any"))
		until := "until " + s.EndsAt.In(now.Location()).Format("01-02 15:04")
		line := strings.Join([]string{what, until, "by " + text(cmp.Or(s.CreatedBy, "-")), text(s.Comment)}, st.Muted.Render(" · "))
		lines = append(lines, p.env.Styles.Truncate(line, p.width))
	}
	return strings.Join(lines, "\n")
}
