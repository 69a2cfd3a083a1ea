package components

import (
	"math"
	"strings"
)

var sparkBars = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values as one line of bars, newest on the right, at most
// width cells: older values that do not fit are left out, and a short
// series is padded on the left. Bars scale from 0 to max (the largest
// value when max <= 0). Zero is the lowest bar and any positive value is
// higher, so that "a little" never looks like "nothing"; NaN (no data) is
// a blank.
func Sparkline(values []float64, width int, max float64) string {
	if width <= 0 {
		return ""
	}
	if len(values) > width {
		values = values[len(values)-width:]
	}
	if max <= 0 {
		for _, v := range values {
			if v > max {
				max = v
			}
		}
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", width-len(values)))
	top := len(sparkBars) - 1
	for _, v := range values {
		switch {
		case math.IsNaN(v):
			b.WriteByte(' ')
		case v <= 0 || max <= 0:
			b.WriteRune(sparkBars[0])
		default:
			i := 1 + int(math.Round(min(v/max, 1)*float64(top-1)))
			b.WriteRune(sparkBars[min(i, top)])
		}
	}
	return b.String()
}
