package components

import (
	"strings"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Column describes one table column. When the terminal is too narrow for
// every column at its Min width, columns are dropped, the highest Drop
// first. The space left over goes to the columns that can grow: the
// bounded ones in proportion to their room, then the unbounded ones.
type Column struct {
	Title string
	Min   int  // the narrowest useful width
	Max   int  // 0: always Min; -1: takes whatever is left
	Drop  int  // 0: never dropped; higher numbers are dropped first
	Right bool // right-aligned (numbers)
	// KeepEnd cuts text that does not fit on the left, keeping its end:
	// for IDs that share a beginning and differ at the end (a job name and
	// a timestamp), so that cut rows still tell apart.
	KeepEnd bool
	// Drawn cells are drawn by the page: already escaped, possibly styled
	// (a strip of colored runs). The table neither escapes nor styles
	// them, and shows them without colors on the selected row.
	Drawn bool
}

// Layout returns the width of each column for a line of width cells, 0 for
// the columns it drops. Columns are separated by one space.
func Layout(cols []Column, width int) []int {
	w := make([]int, len(cols))
	shown := 0
	total := -1 // n columns need n-1 gaps
	for i, c := range cols {
		w[i] = c.Min
		total += c.Min + 1
		shown++
	}
	for total > width && shown > 1 {
		drop := -1
		for i, c := range cols {
			if w[i] > 0 && c.Drop > 0 && (drop < 0 || c.Drop >= cols[drop].Drop) {
				drop = i
			}
		}
		if drop < 0 {
			break
		}
		total -= w[drop] + 1
		w[drop] = 0
		shown--
	}
	spare := width - total
	// Bounded columns grow in proportion to how much they can grow; what
	// is left goes to the unbounded ones.
	need := 0
	for i, c := range cols {
		if w[i] > 0 && c.Max > c.Min {
			need += c.Max - c.Min
		}
	}
	if need > 0 && spare > 0 {
		give := min(spare, need)
		left := give
		for i, c := range cols {
			if w[i] > 0 && c.Max > c.Min {
				add := give * (c.Max - c.Min) / need
				w[i] += add
				left -= add
			}
		}
		for i, c := range cols { // rounding: a cell each, in order
			if left == 0 {
				break
			}
			if w[i] > 0 && c.Max > w[i] {
				w[i]++
				left--
			}
		}
		spare -= give
	}
	var flex []int
	for i, c := range cols {
		if w[i] > 0 && c.Max < 0 {
			flex = append(flex, i)
		}
	}
	for k, i := range flex {
		if spare <= 0 {
			break
		}
		add := spare / (len(flex) - k)
		w[i] += add
		spare -= add
	}
	return w
}

// Table is a list of rows with a cursor that scrolls to stay visible. It
// keeps no data of its own beyond the cells it is given.
type Table struct {
	Columns []Column
	// Style, when set, styles one cell of an unselected row (a status
	// column in its color).
	Style func(row, col int) lipgloss.Style
	// Plain shows no selected row: a table to read, not to pick from.
	Plain bool

	n      int
	row    func(i int) []string
	cursor int
	offset int
	width  int
	height int // lines, with the column titles
}

// SetSize sets the table's size in cells; height counts the title line.
func (t *Table) SetSize(width, height int) {
	t.width, t.height = width, max(height, 2)
	t.clamp()
}

// SetRows replaces the rows. The cursor stays at its index; callers that
// follow one item across reordering use SetCursor after.
func (t *Table) SetRows(rows [][]string) {
	t.SetRowFunc(len(rows), func(i int) []string { return rows[i] })
}

// SetRowFunc replaces the rows with n rows that row draws on demand: only
// the rows on screen are ever formatted, however long the list.
func (t *Table) SetRowFunc(n int, row func(i int) []string) {
	t.n, t.row = n, row
	t.clamp()
}

// Len is the number of rows.
func (t *Table) Len() int { return t.n }

// Cursor is the index of the selected row (0 when there are none).
func (t *Table) Cursor() int { return t.cursor }

// SetCursor selects row i.
func (t *Table) SetCursor(i int) {
	t.cursor = i
	t.clamp()
}

// Move moves the cursor by n rows, stopping at either end.
func (t *Table) Move(n int) { t.SetCursor(t.cursor + n) }

// Page is the number of rows shown at once.
func (t *Table) Page() int { return max(t.height-1, 1) }

func (t *Table) clamp() {
	t.cursor = max(min(t.cursor, t.n-1), 0)
	page := t.Page()
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+page {
		t.offset = t.cursor - page + 1
	}
	t.offset = max(min(t.offset, t.n-page), 0)
}

// View draws the title line and the visible rows, each exactly the
// table's width.
func (t *Table) View(st *Styles) string {
	widths := Layout(t.Columns, t.width)
	var b strings.Builder
	b.WriteString(t.line(widths, st, -1, nil))
	end := min(t.offset+t.Page(), t.n)
	for i := t.offset; i < end; i++ {
		b.WriteByte('\n')
		b.WriteString(t.line(widths, st, i, t.row(i)))
	}
	return b.String()
}

// line draws row i (-1: the titles).
func (t *Table) line(widths []int, st *Styles, i int, cells []string) string {
	var b strings.Builder
	first := true
	selected := i >= 0 && i == t.cursor && !t.Plain
	for c, w := range widths {
		if w == 0 {
			continue
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		col := &t.Columns[c]
		text := ""
		switch {
		case i < 0:
			text = col.Title
		case c < len(cells) && col.Drawn && selected:
			text = ansi.Strip(cells[c]) // the selection's reverse video shows through
		case c < len(cells) && col.Drawn:
			text = cells[c]
		case c < len(cells):
			text = Escape(clip(cells[c], w, col.KeepEnd)) // cells are what the server sent
		}
		var cell string
		if col.KeepEnd && i >= 0 {
			cell = st.FitLeft(text, w)
		} else {
			cell = st.Fit(text, w, col.Right)
		}
		switch {
		case i < 0:
			cell = st.Head.Render(cell)
		case !selected && t.Style != nil && !col.Drawn:
			cell = t.Style(i, c).Render(cell)
		}
		b.WriteString(cell)
	}
	out := st.Fit(b.String(), t.width, false)
	if selected {
		return st.Selected.Render(out)
	}
	return out
}

// bytesPerCell bounds the text a cell is made from: generous for any
// script (a cluster of a few code points is a cell or two), so that only
// text no cell could show whole is cut before it is measured.
const bytesPerCell = 32

// Clip cuts raw text to what w cells could show, before it is escaped
// and measured: text from a server outside a table cell (a silence's
// comment, an error) costs a line no more than a line's worth.
func Clip(s string, w int) string { return clip(s, w, false) }

// EscapeLine is Escape of what of s a line of w cells could show.
func EscapeLine(s string, w int) string { return Escape(Clip(s, w)) }

// clip cuts raw text to what a cell of w cells could show, keeping its
// end when keepEnd is set, and marks the cut. Escaping, measuring and
// truncating a task ID or a job name of a megabyte (a server's that no
// server of ours sends) took a second a row, and the dashboard hung on
// every message; the cell shows the same either way.
func clip(s string, w int, keepEnd bool) string {
	n := (w + 2) * bytesPerCell
	if len(s) <= n {
		return s
	}
	if keepEnd {
		i := len(s) - n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		return Ellipsis + s[i:]
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + Ellipsis
}
