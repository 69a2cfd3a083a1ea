package pages

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/components"
)

// rates are the counters shown per second at the top, from the difference
// between two system messages.
var rates = []struct{ key, label string }{
	{"bus.accepted", "events/s"},
	{"bus.refused", "refused/s"},
	{"stream.messages", "stream messages/s"},
}

// headline are the gauges shown next to the rates.
var headline = []struct{ key, label string }{
	{"bus.tasks", "tasks in memory"},
	{"bus.holding", "holding"},
	{"bus.queued", "queued"},
	{"stream.clients", "stream clients"},
}

// sectionOrder puts the data path first; other parts follow by name.
var sectionOrder = map[string]int{"bus": 0, "wal": 1, "stream": 2, "alert": 3, "notify": 4, "redis": 5}

// System shows Apollo-11's own health: the body of GET /api/v1/system, as
// the stream sends it every few seconds, flattened into sections.
type System struct {
	env    Env
	vp     viewport.Model
	stats  map[string]float64 // flattened numbers
	texts  map[string]string  // flattened everything else
	prev   map[string]float64
	at     time.Time
	prevAt time.Time
	gap    bool // the next stats come after a gap: no rate from the ones held
	err    error
	width  int
	height int
}

// NewSystem returns an empty System page.
func NewSystem(env Env) *System {
	return &System{env: env, vp: viewport.New()}
}

// SetStats takes a new system message's stats, received at at.
func (p *System) SetStats(raw json.RawMessage, at time.Time) {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		p.err = err
		return
	}
	p.err = nil
	p.prev, p.prevAt = p.stats, p.at
	if p.gap {
		p.prev, p.prevAt, p.gap = nil, time.Time{}, false
	}
	p.stats, p.texts, p.at = map[string]float64{}, map[string]string{}, at
	flatten("", v, p.stats, p.texts)
	p.render()
}

// Forget drops the stats that the rates are measured from: the next ones
// come after a gap (the tab was not shown, the stream reconnected), so a
// rate needs two more.
func (p *System) Forget() { p.gap = true }

// SetError records that the stats could not be had.
func (p *System) SetError(err error) {
	p.err = err
	p.render()
}

// Loaded reports whether any stats arrived.
func (p *System) Loaded() bool { return p.stats != nil }

func flatten(prefix string, v any, nums map[string]float64, texts map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(join(prefix, k), e, nums, texts)
		}
	case float64:
		nums[prefix] = x
	case nil:
		texts[prefix] = "-"
	case string:
		texts[prefix] = x
	default:
		b, _ := json.Marshal(x)
		texts[prefix] = string(b)
	}
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// SetSize implements the dashboard's page.
func (p *System) SetSize(width, height int) {
	p.width, p.height = width, height
	p.vp.SetWidth(width)
	p.vp.SetHeight(max(height-2, 1))
	p.render()
}

// Typing implements the dashboard's page.
func (p *System) Typing() bool { return false }

// Update implements the dashboard's page.
func (p *System) Update(msg tea.KeyPressMsg) tea.Cmd {
	p.vp, _ = p.vp.Update(msg)
	return nil
}

// Keys implements the dashboard's page.
func (p *System) Keys(bool) []key.Binding { return []key.Binding{moveHelp} }

// View implements the dashboard's page.
func (p *System) View() string {
	st := p.env.Styles
	switch {
	case p.stats == nil && p.err != nil && apollo.ErrorCode(p.err) == apollo.ENOTFOUND:
		return st.Muted.Render("System stats are not available on this server.")
	case p.stats == nil && p.err != nil:
		return st.Bad.Render("Could not load the system stats: " + components.EscapeLine(p.err.Error(), p.width))
	case p.stats == nil:
		return st.Muted.Render("Waiting for the server's stats…")
	}
	return p.head() + "\n\n" + p.vp.View()
}

// head shows the rates and the main gauges on one line.
func (p *System) head() string {
	st := p.env.Styles
	var parts []string
	secs := p.at.Sub(p.prevAt).Seconds()
	for _, r := range rates {
		cur, ok := p.stats[r.key]
		if !ok {
			continue
		}
		v := "-"
		if old, had := p.prev[r.key]; had && secs > 0 && cur >= old {
			v = components.Number((cur - old) / secs)
		}
		parts = append(parts, r.label+" "+st.Bold.Render(v))
	}
	for _, g := range headline {
		if v, ok := p.stats[g.key]; ok {
			parts = append(parts, g.label+" "+st.Bold.Render(components.Count(int64(v))))
		}
	}
	parts = append(parts, st.Muted.Render("as of "+p.at.In(p.env.Now().Location()).Format("15:04:05")))
	return p.env.Styles.Truncate(strings.Join(parts, st.Muted.Render(" · ")), p.width)
}

// render lays the sections out in as many columns as fit. A part's
// nested figures (notifications.channels.console.queued) are grouped
// under a heading (channels.console) and labelled by their own name
// (queued), so that labels cut to fit still tell apart.
func (p *System) render() {
	if p.stats == nil || p.width == 0 {
		return
	}
	// section -> group within it ("" for its own figures) -> name, value
	sections := map[string]map[string][][2]string{}
	add := func(k, v string) {
		sec, rest, ok := strings.Cut(k, ".")
		if !ok {
			sec, rest = "server", k
		}
		group, name := "", rest
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			group, name = rest[:i], rest[i+1:]
		}
		if sections[sec] == nil {
			sections[sec] = map[string][][2]string{}
		}
		sections[sec][group] = append(sections[sec][group], [2]string{name, v})
	}
	for k, v := range p.stats {
		add(k, value(v))
	}
	loc := p.env.Now().Location()
	for k, v := range p.texts {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			v = t.In(loc).Format("15:04:05")
		}
		add(k, v)
	}
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		oa, ka := sectionOrder[a]
		ob, kb := sectionOrder[b]
		if ka != kb {
			if ka {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(oa, ob), cmp.Compare(a, b))
	})
	st := p.env.Styles
	var lines []string
	for _, n := range names {
		lines = append(lines, st.Bold.Render(components.EscapeLine(n, p.width)))
		groups := make([]string, 0, len(sections[n]))
		for g := range sections[n] {
			groups = append(groups, g)
		}
		slices.Sort(groups) // "", a section's own figures, first
		for _, g := range groups {
			if g != "" {
				lines = append(lines, p.env.Styles.Truncate(st.Muted.Render("  "+components.EscapeLine(g, p.width)), p.width))
			}
			lines = append(lines, p.cells(sections[n][g])...)
		}
		lines = append(lines, "")
	}
	p.vp.SetContent(strings.Join(lines, "\n"))
}

// cells lays out name and value pairs in as many columns as fit.
func (p *System) cells(kv [][2]string) []string {
	const cell, valueW = 39, 16
	perLine := max(p.width/cell, 1)
	st := p.env.Styles
	slices.SortFunc(kv, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	var lines []string
	for i := 0; i < len(kv); i += perLine {
		var row []string
		for _, e := range kv[i:min(i+perLine, len(kv))] {
			// Keys and texts are the server's, whatever they are.
			label := p.env.Styles.Fit(components.EscapeLine(e[0], cell), cell-valueW-1, false)
			row = append(row, st.Muted.Render(label)+" "+p.env.Styles.Fit(components.EscapeLine(e[1], cell), valueW, true))
		}
		lines = append(lines, p.env.Styles.Truncate(strings.Join(row, " "), p.width))
	}
	return lines
}

func value(v float64) string {
	if v == float64(int64(v)) {
		return components.Count(int64(v))
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
