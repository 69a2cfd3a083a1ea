package components

import "strings"

// runGlyphs draw a run by its status as a bar whose height reads without
// color: failures stand tall over a floor of successes.
var runGlyphs = []struct{ status, glyph, label string }{
	{"success", "▁", "success"},
	{"failed", "█", "failed"},
	{"timeout", "▓", "timed out"},
	{"running", "▄", "running"},
	{"pending", "▂", "pending"},
	{"manual_blocked", "▒", "blocked"},
}

func runGlyph(status string) string {
	for _, g := range runGlyphs {
		if g.status == status {
			return g.glyph
		}
	}
	return "?"
}

// RunStrip draws a job's recent runs, oldest first, one cell a run in the
// color of its status (a late run that succeeded in the warning color),
// the newest last: at most width cells, the oldest left out. late may be
// shorter than statuses.
func RunStrip(st *Styles, statuses []string, late []bool, width int) string {
	if width <= 0 {
		return ""
	}
	from := max(len(statuses)-width, 0)
	var b strings.Builder
	for i := from; i < len(statuses); i++ {
		style := st.State(statuses[i])
		if statuses[i] == "manual_blocked" {
			style = st.Muted
		}
		if i < len(late) && late[i] && statuses[i] == "success" {
			style = st.Warn
		}
		b.WriteString(style.Render(runGlyph(statuses[i])))
	}
	return b.String()
}

// RunLegend says what the strip's cells mean.
func RunLegend(st *Styles) string {
	parts := make([]string, 0, len(runGlyphs)+1)
	for _, g := range runGlyphs {
		style := st.State(g.status)
		if g.status == "manual_blocked" {
			style = st.Muted
		}
		parts = append(parts, style.Render(g.glyph)+" "+g.label)
	}
	if !st.NoColor { // a late run is told by its color alone
		parts = append(parts, st.Warn.Render(runGlyph("success"))+" started late")
	}
	return strings.Join(parts, "  ")
}
