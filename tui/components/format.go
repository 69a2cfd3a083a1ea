package components

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// Ellipsis marks text cut to fit.
const Ellipsis = "…"

// Width is how many cells the terminal gives s (which may hold styles),
// counted as st.Cells says.
func (st *Styles) Width(s string) int { return st.Cells.StringWidth(s) }

// Truncate cuts s (which may hold styles) to at most w cells, ending in
// an ellipsis when something was cut. It cuts between grapheme clusters,
// never inside one (a flag, an emoji joined by ZWJ, a letter and its
// accent).
func (st *Styles) Truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if st.Width(s) <= w {
		return s
	}
	if ansi.StringWidth(s) <= w {
		// Method.Truncate returns s whole when its clusters fit, whatever
		// the method (x/ansi v0.11.9 measures that with StringWidth): text
		// that is too wide only as a terminal of code points counts it
		// came back uncut. Blanks after it make it too wide either way;
		// the cut falls inside s, before them.
		s += strings.Repeat(" ", w+1)
	}
	return st.Cells.Truncate(s, w, Ellipsis)
}

// Fit truncates s to w cells and pads it with spaces to exactly w, on the
// left when right is set (numbers line up on their last digit).
func (st *Styles) Fit(s string, w int, right bool) string {
	s = st.Truncate(s, w)
	pad := w - st.Width(s)
	if pad <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", pad) + s
	}
	return s + strings.Repeat(" ", pad)
}

// FitLeft fits plain s (no styles) in exactly w cells, left-aligned,
// cutting it on the left when it does not fit: "…0T200735Z#1". The end of
// an ID is what tells it from its neighbours.
func (st *Styles) FitLeft(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := st.Width(s)
	if n <= w {
		return st.Fit(s, w, false)
	}
	// TruncateLeft keeps a cluster that the cut falls inside of: one cell
	// more goes, until the end, not the ellipsis, fits.
	cut := n - w + 1
	rest := st.Cells.TruncateLeft(s, cut, "")
	for st.Width(rest) > w-1 && rest != "" {
		cut++
		rest = st.Cells.TruncateLeft(s, cut, "")
	}
	return st.Fit(Ellipsis+rest, w, false)
}

// Wrap breaks s into lines of at most w cells, at spaces and hyphens when
// it can, inside a word when it must, never inside a cluster.
func (st *Styles) Wrap(s string, w int) string { return st.Cells.Wrap(s, max(w, 1), "") }

// Ago says how long before now t was, in the largest whole unit: "now",
// "42s", "5m", "3h", "2d". A zero t is "-".
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// AgoMs is Ago for a time in Unix milliseconds; 0 is "-".
func AgoMs(now time.Time, ms int64) string {
	if ms == 0 {
		return "-"
	}
	return Ago(now, time.UnixMilli(ms))
}

// Millis shows a duration given in milliseconds compactly: "850ms",
// "12.4s", "3m05s", "2h10m". A negative or zero value is "-".
func Millis(ms float64) string {
	if ms <= 0 || math.IsNaN(ms) {
		return "-"
	}
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return strconv.Itoa(int(ms)) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		m := int(d / time.Minute)
		return strconv.Itoa(m) + "m" + twoDigits(int((d-time.Duration(m)*time.Minute)/time.Second)) + "s"
	}
	h := int(d / time.Hour)
	return strconv.Itoa(h) + "h" + twoDigits(int((d-time.Duration(h)*time.Hour)/time.Minute)) + "m"
}

func twoDigits(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// Percent shows a ratio in 0..1 as a percentage with one decimal below
// 10%, none above; NaN is "-".
func Percent(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	p := r * 100
	if p != 0 && p < 10 {
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// Number shows a float with at most one decimal, dropping ".0".
func Number(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// Count shows an integer with a thin grouping: 1234567 is "1 234 567".
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Span shows a duration as Go writes it without its zero units: "5m0s" is
// "5m", "1h0m0s" is "1h". Text that is not a duration is returned as is.
func Span(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// codePoints measures as most terminals do, code point by code point.
var codePoints = &Styles{Cells: ansi.WcWidth}

// Truncate is Styles.Truncate for text printed outside the dashboard, on
// a terminal that has not said how it counts (the CLI's tables).
func Truncate(s string, w int) string { return codePoints.Truncate(s, w) }
