package pages

import (
	"strconv"
	"strings"

	"github.com/apollo-11/apollo/tui/components"
)

// list is what the list pages (Health, Jobs, Tasks, Alerts) share: a
// table under a prefix filter, in the room the screen gives them.
type list struct {
	env    Env
	table  components.Table
	filter components.Filter
	width  int
	height int
}

// newList is an empty list of columns whose filter matches the start of
// what ("job name"). The page sets the table's Style: it reads its rows.
func newList(env Env, columns []components.Column, what string) list {
	l := list{env: env, filter: components.NewFilter(env.Styles, what)}
	l.table.Columns = columns
	return l
}

// fit gives the table the room the screen leaves under the summary line
// and the filter, with foot lines kept under it.
func (l *list) fit(width, height, foot int) {
	l.width, l.height = width, height
	l.table.SetSize(width, height-1-filterLines(&l.filter)-foot)
}

// Typing implements the dashboard's page: the filter takes every key
// while it is typed.
func (l *list) Typing() bool { return l.filter.Active() }

// lines are the page's lines down to its table: summary, the filter while
// it is typed or holds a prefix, then the table, or when no row is shown
// why: empty, or "none starts with" and the prefix (none: "No job") when
// the filter holds one.
func (l *list) lines(summary string, rows int, empty, none string) []string {
	st := l.env.Styles
	out := []string{summary}
	if f := l.filter.View(st, l.width); f != "" {
		out = append(out, f)
	}
	if rows > 0 {
		return append(out, l.table.View(st))
	}
	msg := empty
	if v := l.filter.Value(); v != "" {
		msg = none + " starts with " + strconv.Quote(v) + "."
	}
	return append(out, st.Muted.Render(msg))
}

// pad adds the blank lines that keep what follows a table of rows at the
// bottom of the page when the table is short.
func (l *list) pad(lines []string, rows int) []string {
	if n := l.table.Page() - rows; n > 0 {
		lines = append(lines, strings.Repeat("\n", n-1))
	}
	return lines
}

// narrow keeps the items of all that keep accepts, in order, in dst's
// array, and says where among them the selected one is (-1: not kept), so
// that the cursor stays on the row it was on.
func narrow[T any](dst, all []T, keep, selected func(*T) bool) ([]T, int) {
	dst, at := dst[:0], -1
	for i := range all {
		if keep(&all[i]) {
			if selected(&all[i]) {
				at = len(dst)
			}
			dst = append(dst, all[i])
		}
	}
	return dst, at
}
