package tui

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/cenkalti/backoff/v5"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
	"github.com/apollo-11/apollo/tui/pages"
)

// page is what the dashboard needs of each screen.
type page interface {
	SetSize(width, height int)
	// Update handles a key the dashboard did not take for itself.
	Update(tea.KeyPressMsg) tea.Cmd
	View() string
	// Typing reports whether a text field has the keys: the dashboard's
	// single-letter keys are off meanwhile.
	Typing() bool
	// Keys are the page's own keys for the help: all of them, or the few
	// that fit on the bottom line.
	Keys(full bool) []key.Binding
}

var (
	_ page = (*pages.Health)(nil)
	_ page = (*pages.Tasks)(nil)
	_ page = (*pages.Jobs)(nil)
	_ page = (*pages.Alerts)(nil)
	_ page = (*pages.System)(nil)
)

type tab int

const (
	tabHealth tab = iota
	tabTasks
	tabJobs
	tabAlerts
	tabSystem
	numTabs
)

var tabNames = [numTabs]string{"Health", "Tasks", "Jobs", "Alerts", "System"}

// chrome is the lines around a page: header and tabs above, the notice
// and the key hints below.
const chrome = 4

// minBody is the fewest lines a page gets: a summary, the column titles
// and a row.
const minBody = 3

// Model is the dashboard. Create it with New, run it as a Bubble Tea
// model, and Close it after the program ends.
type Model struct {
	opts Options
	run  *runner
	api  *apiclient.Client
	st   *components.Styles
	host string

	health *pages.Health
	tasks  *pages.Tasks
	jobs   *pages.Jobs
	alerts *pages.Alerts
	system *pages.System
	pages  [numTabs]page
	tab    tab

	width, height int
	help          help.Model
	showHelp      bool
	notice        string
	noticeBad     bool

	conn      connection
	store     *taskStore
	prefix    string // the task filter the stream was asked for
	subSystem bool   // the stream was asked for the system message (the System tab shows)

	seriesFor string
	// openJob is the job enter on the Health tab asked the Jobs tab for,
	// until the jobs read for it answer: whether it ran is known then.
	openJob       string
	healthGone    bool // GET /api/v1/jobs/health is 404: stop asking
	alertsGone    bool // GET /api/v1/alerts is 404: stop asking
	silencesGone  bool
	lastSystem    time.Time
	lastTaskPaint time.Time
}

// New checks the options and returns the dashboard, not yet connected:
// the connection is made by the command Init returns.
func New(opts Options) (*Model, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	api, err := apiclient.New(opts.Server, apiclient.WithToken(opts.Token), apiclient.WithHTTPClient(opts.HTTPClient))
	if err != nil {
		return nil, err
	}
	st := components.NewStyles(opts.NoColor)
	env := pages.Env{Styles: st, Now: opts.Clock.Now}
	m := &Model{
		opts:   opts,
		run:    newRunner(),
		api:    api,
		st:     st,
		health: pages.NewHealth(env),
		tasks:  pages.NewTasks(env),
		jobs:   pages.NewJobs(env),
		alerts: pages.NewAlerts(env),
		system: pages.NewSystem(env),
		help:   help.New(),
		store:  newTaskStore(opts.MaxTasks),
	}
	if u, err := url.Parse(opts.Server); err == nil {
		m.host = u.Host
	}
	m.pages = [numTabs]page{m.health, m.tasks, m.jobs, m.alerts, m.system}
	m.help.Styles.ShortKey = st.Key
	m.help.Styles.FullKey = st.Key
	m.help.Styles.ShortDesc = st.Muted
	m.help.Styles.FullDesc = st.Muted
	m.help.Styles.ShortSeparator = st.Muted
	m.help.Styles.FullSeparator = st.Muted
	bo := &backoff.ExponentialBackOff{InitialInterval: opts.ReconnectMin, RandomizationFactor: 0.25, Multiplier: 2, MaxInterval: opts.ReconnectMax}
	if opts.noJitter {
		bo.RandomizationFactor = 0
	}
	bo.Reset()
	m.conn = connection{gen: 1, state: stateConnecting, backoff: bo}
	return m, nil
}

// Close stops every command the dashboard started and waits for them. It
// is idempotent.
func (m *Model) Close() { m.run.Close() }

// Init starts connecting and the first fetches.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.dial(), m.fetchHealth(), m.fetchJobs(), m.fetchAlerts(), m.fetchSilences(), m.fetchSystem(), m.tick())
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		return m, nil
	case tea.KeyPressMsg:
		return m, m.key(msg)
	case tea.ModeReportMsg:
		// The terminal counts grapheme clusters (mode 2027), and Bubble
		// Tea turns that on and lays the screen out by clusters from now
		// on, on the same answers: the dashboard measures as they do.
		if msg.Mode == ansi.ModeUnicodeCore && (msg.Value == ansi.ModeReset || msg.Value == ansi.ModeSet || msg.Value == ansi.ModePermanentlySet) {
			m.st.Cells = ansi.GraphemeWidth
			m.resize()
		}
		return m, nil
	}
	if cmd, ok := m.updateConn(msg); ok {
		return m, cmd
	}
	if cmd, ok := m.updateData(msg); ok {
		return m, cmd
	}
	return m, m.updateIntent(msg)
}

func (m *Model) resize() {
	m.help.SetWidth(m.width)
	for _, p := range m.pages {
		p.SetSize(m.width, max(m.height-chrome, minBody))
	}
}

// key handles a key press: ours first, unless a field has the keys.
func (m *Model) key(msg tea.KeyPressMsg) tea.Cmd {
	p := m.pages[m.tab]
	if key.Matches(msg, ctrlC) {
		return tea.Quit
	}
	if p.Typing() {
		return m.afterPageKey(p.Update(msg))
	}
	if m.showHelp {
		m.showHelp = false
		if key.Matches(msg, keys.Help) {
			return nil
		}
	}
	switch {
	case key.Matches(msg, keys.Quit):
		return tea.Quit
	case key.Matches(msg, keys.Next):
		m.setTab((m.tab + 1) % numTabs)
	case key.Matches(msg, keys.Prev):
		m.setTab((m.tab + numTabs - 1) % numTabs)
	case key.Matches(msg, keys.Jump):
		n, _ := strconv.Atoi(msg.String())
		m.setTab(tab(n - 1))
	case key.Matches(msg, keys.Help):
		m.showHelp = true
	case key.Matches(msg, keys.Reconnect) && m.conn.state != stateLive:
		return m.redial()
	default:
		return m.afterPageKey(p.Update(msg))
	}
	return m.afterTab()
}

func (m *Model) setTab(t tab) {
	if t >= 0 && t < numTabs {
		m.tab = t
	}
}

// afterTab fetches what a tab needs when it comes into view: the Jobs
// tab its table of every job (fetchJobs), the System tab its figures. The System
// tab alone asks the stream for the system message (each terminal left
// on another tab cost the server its tenant's figures every 5 s, for
// nothing); its figures, not sent while it was away, are read at once.
func (m *Model) afterTab() tea.Cmd {
	var cmds []tea.Cmd
	if m.tab == tabJobs {
		cmds = append(cmds, m.fetchMetrics(), m.fetchSeriesIfMoved())
	}
	if (m.tab == tabSystem) != m.subSystem {
		if m.tab == tabSystem {
			m.system.Forget()
			m.lastSystem = time.Time{}
			cmds = append(cmds, m.fetchSystem())
		}
		if m.conn.state == stateLive {
			cmds = append(cmds, m.subscribe())
		}
	}
	return tea.Batch(cmds...)
}

// subscribe asks the stream for what the dashboard shows now, from the
// last cursor: the tasks filter is the one the cursor is of (a new prefix
// clears it first).
func (m *Model) subscribe() tea.Cmd {
	m.subSystem = m.tab == tabSystem
	cmd := m.send(subscribeJSON(m.prefix, m.conn.cursor, m.subSystem))
	if cmd != nil { // sent on this connection: the next answers are of it
		m.conn.unanswered++
		m.conn.refused = false
	}
	return cmd
}

// afterPageKey follows a page's key: a new job selected needs its series.
func (m *Model) afterPageKey(cmd tea.Cmd) tea.Cmd {
	if m.tab == tabJobs {
		return tea.Batch(cmd, m.fetchSeriesIfMoved())
	}
	return cmd
}

// say puts a line in the notice bar. Notices quote what the server sent
// (rule names, error messages): escaped.
func (m *Model) say(bad bool, text string) {
	m.notice, m.noticeBad = components.EscapeLine(text, max(m.width, 80)), bad
}

// View draws the whole screen, exactly the terminal's size.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "Apollo-11 · " + m.conn.label(m.opts.Clock.Now())
	return v
}

func (m *Model) render() string {
	if m.width == 0 {
		return ""
	}
	bodyH := max(m.height-chrome, minBody)
	var body string
	p := m.pages[m.tab]
	if m.showHelp {
		body = m.st.Bold.Render("Keys") + "\n\n" + m.help.FullHelpView(helpKeys{page: p.Keys(true)}.FullHelp())
	} else {
		body = p.View()
	}
	notice := ""
	if m.notice != "" {
		st := m.st.Good
		if m.noticeBad {
			st = m.st.Bad
		}
		notice = st.Render(m.st.Truncate(m.notice, m.width))
	}
	hint := m.st.Truncate(m.help.ShortHelpView(helpKeys{page: p.Keys(false), typing: p.Typing()}.ShortHelp()), m.width)
	// A terminal too short for the chrome and the smallest page gives up,
	// in turn, an empty notice line, the tabs, the keys and the notice: the
	// screen is never taller than the terminal, whose renderer would cut
	// the bottom lines, the keys and what the last action did.
	over := chrome + bodyH - m.height
	showNotice, showTabs, showHint := true, true, true
	giveUp := func(show *bool) {
		if over > 0 && *show {
			*show, over = false, over-1
		}
	}
	if notice == "" {
		giveUp(&showNotice)
	}
	giveUp(&showTabs)
	giveUp(&showHint)
	giveUp(&showNotice)
	lines := []string{m.header()}
	if showTabs {
		lines = append(lines, m.tabBar())
	}
	lines = append(lines, fitLines(m.st, body, m.width, bodyH)...)
	if showNotice {
		lines = append(lines, notice)
	}
	if showHint {
		lines = append(lines, hint)
	}
	if len(lines) > m.height { // shorter than the smallest page: its top
		lines = lines[:max(m.height, 1)]
	}
	return strings.Join(lines, "\n")
}

// fitLines cuts or pads s to exactly h lines of at most w cells.
func fitLines(st *components.Styles, s string, w, h int) []string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = st.Truncate(l, w)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

func (m *Model) header() string {
	st := m.st
	now := m.opts.Clock.Now()
	parts := []string{st.App.Render("Apollo-11"), m.conn.indicator(st, now), st.Muted.Render(m.host)}
	if p := m.conn.principal; p.Name != "" {
		who := components.EscapeLine(p.Name+" ("+p.Role+")", max(m.width, 80))
		if p.Tenant != "" {
			who += " @" + components.EscapeLine(p.Tenant, max(m.width, 80))
		}
		parts = append(parts, st.Muted.Render(who))
	}
	return m.st.Truncate(strings.Join(parts, "  "), m.width)
}

func (m *Model) tabBar() string {
	names := tabNames
	if n := m.alerts.Firing(); n > 0 {
		names[tabAlerts] += " (" + strconv.Itoa(n) + ")"
	}
	return components.Tabs(names[:], int(m.tab), m.st, m.width)
}

// paintTasks hands the page the current list.
func (m *Model) paintTasks() {
	m.tasks.SetTasks(m.store.list())
	m.lastTaskPaint = m.opts.Clock.Now()
}

var _ tea.Model = (*Model)(nil)

func (m *Model) now() time.Time { return m.opts.Clock.Now() }
