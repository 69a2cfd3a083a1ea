package components

import (
	"strconv"
	"strings"
)

// Tabs draws the tab bar: each name numbered for its jump key, the active
// one highlighted, cut to width.
func Tabs(names []string, active int, st *Styles, width int) string {
	var b strings.Builder
	for i, n := range names {
		label := strconv.Itoa(i+1) + " " + n
		if i == active {
			b.WriteString(st.TabActive.Render(label))
		} else {
			b.WriteString(st.TabIdle.Render(label))
		}
	}
	return st.Truncate(b.String(), width)
}
