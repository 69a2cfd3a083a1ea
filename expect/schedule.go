package expect

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/adhocore/gronx"
)

// Schedule yields the instants a job is due at: a cron expression read on
// the wall clock of a time zone, or "@every <duration>". The scheduler runs
// jobs at these instants and expectations wait for runs at them, so both
// read a schedule, and the two nights of a daylight saving change, the same
// way. A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	text     string
	every    time.Duration // @every; the cron fields below are unused
	expr     string
	loc      *time.Location
	hourWild bool
}

// descriptors are the @-names a schedule may use besides @every.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// ParseSchedule reads a schedule: a 5-field cron expression (minute hour
// day-of-month month day-of-week), a 6-field one with seconds first, an
// @-descriptor, or "@every <duration>". Cron fields are checked here, with
// messages that name the field, before gronx sees them: gronx accepts some
// malformed fields (such as "1-2-3") and its messages number the fields.
//
// A nil loc is UTC.
func ParseSchedule(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(expr) > maxScheduleBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d: write 5 fields (minute hour day-of-month month day-of-week), 6 (second first) or an @-descriptor",
			quoteShort(expr), len(expr), maxScheduleBytes)
	}
	text := strings.TrimSpace(expr)
	if rest, ok := strings.CutPrefix(text, "@every"); ok {
		arg := strings.TrimSpace(rest)
		d, err := time.ParseDuration(arg)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q: @every takes a duration like @every 30s or @every 1h; %q is not one (at most %s)", expr, arg, time.Duration(math.MaxInt64).Truncate(time.Hour))
		case d < time.Second:
			return nil, fmt.Errorf("%q: @every takes a duration of at least 1s, like @every 30s or @every 1h", expr)
		}
		return &Schedule{text: expr, every: d, loc: time.UTC}, nil
	}
	if strings.HasPrefix(text, "@") {
		std, ok := descriptors[strings.ToLower(text)]
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q: use @every <duration>, @hourly, @daily, @weekly, @monthly or @yearly", text)
		}
		text = std
	}
	fields := strings.Fields(text)
	names := cronFieldNames[:]
	switch len(fields) {
	case 5:
		names = names[1:]
	case 6:
	default:
		return nil, fmt.Errorf("%q has %d fields: write 5 (minute hour day-of-month month day-of-week) or 6 (second first)", expr, len(fields))
	}
	for i, fld := range fields {
		if err := checkCronField(fld, names[i]); err != nil {
			return nil, fmt.Errorf("%q: %s field %q: %w", expr, names[i], fld, err)
		}
	}
	norm := strings.Join(fields, " ")
	if !gronx.IsValid(norm) {
		return nil, fmt.Errorf("%q is not a valid cron expression", expr)
	}
	// An hour field that starts with "*" ("*", "*/2") is every hour's, as
	// classic cron reads it for DST: such a job runs in real time.
	c := &Schedule{text: expr, expr: norm, loc: loc, hourWild: strings.HasPrefix(fields[len(fields)-4], "*")}
	if _, err := gronx.NextTickAfter(norm, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), false); err != nil {
		return nil, fmt.Errorf("%q never fires (a day that no month has?)", expr)
	}
	return c, nil
}

var cronFieldNames = [...]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

type fieldRule struct {
	lo, hi  int
	names   []string // names[i] is the value lo+i: JAN is 1, SUN is 0
	special func(string) bool
}

var (
	monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	dayNames   = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
	fieldRules = map[string]fieldRule{
		"second":       {lo: 0, hi: 59},
		"minute":       {lo: 0, hi: 59},
		"hour":         {lo: 0, hi: 23},
		"day-of-month": {lo: 1, hi: 31, special: domSpecial},
		"month":        {lo: 1, hi: 12, names: monthNames},
		"day-of-week":  {lo: 0, hi: 7, names: dayNames, special: dowSpecial},
	}
)

// domSpecial accepts L (last day) and NW (weekday nearest day N).
func domSpecial(s string) bool {
	if s == "L" || s == "?" {
		return true
	}
	n, ok := strings.CutSuffix(s, "W")
	return ok && inRange(n, 1, 31)
}

// dowSpecial accepts NL (last N-day of the month) and N#K (K-th N-day).
func dowSpecial(s string) bool {
	if s == "?" {
		return true
	}
	if n, ok := strings.CutSuffix(s, "L"); ok {
		return inRange(n, 0, 7)
	}
	d, k, ok := strings.Cut(s, "#")
	return ok && inRange(d, 0, 7) && inRange(k, 1, 5)
}

func inRange(s string, lo, hi int) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= lo && n <= hi && s == strconv.Itoa(n)
}

// checkCronField checks one field: a comma list of *, N, N-M, each with an
// optional /step, plus the day specials; names for months and weekdays.
func checkCronField(fld, name string) error {
	rule := fieldRules[name]
	for _, part := range strings.Split(strings.ToUpper(fld), ",") {
		if rule.special != nil && rule.special(part) {
			continue
		}
		base, step, hasStep := strings.Cut(part, "/")
		if hasStep && !inRange(step, 1, rule.hi) {
			return fmt.Errorf("step %q must be a number from 1 to %d", step, rule.hi)
		}
		if base == "*" {
			continue
		}
		lo, hi, isRange := strings.Cut(base, "-")
		a, err := rule.value(lo)
		if err != nil {
			return err
		}
		if !isRange {
			continue
		}
		b, err := rule.value(hi)
		if err != nil {
			return err
		}
		if b < a {
			return fmt.Errorf("range %s runs backwards", base)
		}
	}
	return nil
}

func (r fieldRule) value(s string) (int, error) {
	for i, n := range r.names {
		if s == n {
			return i + r.lo, nil
		}
	}
	if !inRange(s, r.lo, r.hi) {
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, r.lo, r.hi)
	}
	return strconv.Atoi(s)
}

// String returns the schedule as written; @every with its duration in
// Go's form ("@every 1h0m0s"), as the scheduler has always shown it.
func (s *Schedule) String() string {
	if s.every > 0 {
		return "@every " + s.every.String()
	}
	return s.text
}

// Every is the interval of an @every schedule; 0 for a cron expression.
func (s *Schedule) Every() time.Duration { return s.every }

// Location is the zone the cron fields are read in (UTC for @every).
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first tick strictly after after, or the zero time when
// there is none.
func (s *Schedule) Next(after time.Time) time.Time {
	if s.every > 0 {
		return nextEvery(s.every, after)
	}
	return s.nextCron(after)
}

// nextEvery fires every d, on multiples of d since the Unix epoch, so that
// ticks are the same across restarts (catch-up depends on that) and
// "@every 1h" fires on the hour, UTC.
func nextEvery(d time.Duration, t time.Time) time.Time {
	n := t.UnixNano()
	k := n / int64(d)
	if n < 0 && n%int64(d) != 0 {
		k--
	}
	return time.Unix(0, (k+1)*int64(d)).UTC()
}

// nextCron matches the cron expression against the wall clock of loc.
//
// gronx computes next ticks in the zone of the time it is given, and across
// a DST change its hour stepping can land on the wrong side of the change.
// So gronx only ever sees "wall-clock" times expressed in UTC, where no day
// has a gap or a fold, and nextCron maps them back to instants, one zone
// period at a time. The rules, documented in docs/scheduler.md and
// docs/expectations.md:
//   - A wall time that a spring-forward gap skips (02:30 on the night the
//     clocks go from 02:00 to 03:00) runs once, at the instant of the change.
//   - A wall time that a fall-back fold repeats runs once, at its first
//     occurrence.
//   - Except when the hour field starts with "*" ("*", "*/2"): such a job
//     runs in real time, as classic cron runs it: through both passes of
//     a repeated hour, and not at all in the hour a gap skips.
func (s *Schedule) nextCron(after time.Time) time.Time {
	from, incl := after.In(s.loc), false
	// Each pass either returns or moves from past a zone change, or past a
	// repeated tick; a few dozen passes cover years of changes.
	for range 64 {
		_, off := from.Zone()
		_, end := from.ZoneBounds()
		w, err := gronx.NextTickAfter(s.expr, time.Unix(from.Unix()+int64(off), 0).UTC(), incl)
		if err != nil {
			return time.Time{}
		}
		at := time.Unix(w.Unix()-int64(off), 0).In(s.loc)
		if end.IsZero() || at.Before(end) {
			if s.hourWild || !repeatedWall(at) {
				return at
			}
			from, incl = at, false
			continue
		}
		// The tick lies past this zone period. If the next period starts
		// with a gap and the tick's wall time is inside it, a fixed-hour
		// job runs at the change; an hourly one runs in real time, so the
		// hour the gap skips is not run again at the change.
		if _, newOff := end.Zone(); !s.hourWild && newOff > off && w.Unix() < end.Unix()+int64(newOff) {
			return end
		}
		from, incl = end, true
	}
	return time.Time{}
}

// repeatedWall reports whether the wall-clock reading of at already
// happened earlier, in the zone period before a fall-back change.
func repeatedWall(at time.Time) bool {
	start, _ := at.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, off := at.Zone()
	_, prevOff := start.Add(-time.Second).Zone()
	return prevOff > off && at.Unix()+int64(off) < start.Unix()+int64(prevOff)
}

// Last returns the most recent tick in (since, now], or the zero time.
// It walks forward from a recent starting point and widens the window only
// when nothing is found, so a per-second job missed for a month costs at
// most an hour of steps.
func (s *Schedule) Last(since, now time.Time) time.Time {
	if s.every > 0 { // no need to walk: ticks are multiples of d
		if last := nextEvery(s.every, now.Add(-s.every)); last.After(since) && !last.After(now) {
			return last
		}
		return time.Time{}
	}
	for _, span := range []time.Duration{time.Hour, 48 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 10 * 367 * 24 * time.Hour} {
		from := now.Add(-span)
		if !from.After(since) {
			from = since
		}
		var last time.Time
		for t := s.Next(from); !t.IsZero() && !t.After(now); t = s.Next(t) {
			last = t
		}
		if !last.IsZero() || from.Equal(since) {
			return last
		}
	}
	return time.Time{}
}
