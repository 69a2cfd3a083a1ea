package rules

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Durations in rules are at most a day: windows are kept in memory and
// Redis, and holding an alert back for longer is better done with silences.
const maxDuration = 24 * time.Hour

var durationUnits = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
}

// unitHints answer the units people write out of habit.
var unitHints = map[string]string{
	"d": "write 24h for a day", "day": "write 24h for a day", "days": "write 24h for a day",
	"sec": "write s for seconds", "secs": "write s for seconds", "second": "write s for seconds", "seconds": "write s for seconds",
	"min": "write m for minutes", "mins": "write m for minutes", "minute": "write m for minutes", "minutes": "write m for minutes",
	"hr": "write h for hours", "hrs": "write h for hours", "hour": "write h for hours", "hours": "write h for hours",
}

// splitNumber checks the shape of a number literal, -?digits[.digits]unit,
// and returns its value and its unit. The lexer only gathers the characters;
// this is where they are judged, once for the text and the JSON forms.
func splitNumber(s string) (float64, string, *Error) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	j := digits(s, i)
	if j < len(s) && s[j] == '.' && j > i {
		if k := digits(s, j+1); k > j+1 {
			j = k
		} else {
			j = 0 // "1." is a mistake
		}
	}
	if j <= i {
		return 0, "", &Error{Msg: fmt.Sprintf("malformed number %s", clip(s)), Expected: "a number such as 5, 0.05, 5% or 1.5h"}
	}
	v, err := strconv.ParseFloat(s[:j], 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, "", &Error{Msg: fmt.Sprintf("number %s is out of range", s[:j])}
	}
	return v, s[j:], nil
}

func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parseDuration reads "90s", "1.5h" or "500ms": 0 to 24h, in whole
// milliseconds.
func parseDuration(s string) (time.Duration, *Error) {
	v, unit, e := splitNumber(s)
	if e != nil {
		return 0, e
	}
	factor, ok := durationUnits[unit]
	switch {
	case unit == "":
		return 0, &Error{Msg: fmt.Sprintf("duration %s has no unit", s), Expected: "ms, s, m or h", Hint: "write " + s + "s or " + s + "m"}
	case !ok:
		return 0, &Error{Msg: fmt.Sprintf("unknown unit %s in %s", clip(unit), clipWord(s)), Expected: "ms, s, m or h", Hint: unitHints[unit]}
	case v < 0:
		return 0, &Error{Msg: fmt.Sprintf("negative duration %s", s), Expected: "0 or more"}
	}
	f := math.Round(v * float64(factor))
	if f > float64(maxDuration) {
		return 0, &Error{Msg: fmt.Sprintf("duration %s is too long", s), Expected: "at most 24h"}
	}
	d := time.Duration(f)
	if d%time.Millisecond != 0 {
		return 0, &Error{Msg: fmt.Sprintf("duration %s is not a whole number of milliseconds", s), Hint: "durations are counted in milliseconds"}
	}
	return d, nil
}

// formatDuration writes d in the largest unit that keeps it whole, so that
// parseDuration reads back the same value: 90m, not 1.5h.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

// literalValue converts a number compared with a metric of class c into the
// metric's own unit: % makes a fraction, a time unit makes milliseconds.
// A unit that does not fit the metric is an error, because such a rule
// would silently never (or always) fire.
func literalValue(lit string, c unitClass, what string) (float64, *Error) {
	v, unit, e := splitNumber(lit)
	if e != nil {
		return 0, e
	}
	switch {
	case unit == "":
		return v, nil
	case unit == "%" && c == classFraction:
		return v / 100, nil
	case durationUnits[unit] != 0 && c == classMillis:
		return v * float64(durationUnits[unit]/time.Millisecond), nil
	case unit != "%" && durationUnits[unit] == 0:
		return 0, &Error{Msg: fmt.Sprintf("unknown unit %s in %s", clip(unit), clipWord(lit)), Expected: "%, ms, s, m or h", Hint: unitHints[unit]}
	}
	switch c {
	case classFraction:
		return 0, &Error{Msg: fmt.Sprintf("%s cannot be compared with %s", what, lit), Expected: "a fraction such as 0.05 or a percentage such as 5%", Hint: what + " is a fraction from 0 to 1"}
	case classMillis:
		return 0, &Error{Msg: fmt.Sprintf("%s cannot be compared with %s", what, lit), Expected: "milliseconds or a duration such as 30s", Hint: what + " is in milliseconds"}
	}
	hint := what + " counts runs"
	if c == classPerMinute {
		hint = what + " is finished runs per minute"
	}
	return 0, &Error{Msg: fmt.Sprintf("%s cannot be compared with %s", what, lit), Expected: "a plain number", Hint: hint}
}
