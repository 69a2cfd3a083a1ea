package expect

import (
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustSchedule(t testing.TB, expr string, loc *time.Location) *Schedule {
	t.Helper()
	s, err := ParseSchedule(expr, loc)
	if err != nil {
		t.Fatalf("ParseSchedule(%q): %v", expr, err)
	}
	return s
}

// ticks returns the first n ticks after from, formatted in loc.
func ticks(s *Schedule, from time.Time, n int, loc *time.Location) []string {
	var out []string
	t := from
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			out = append(out, "none")
			break
		}
		out = append(out, t.In(loc).Format("2006-01-02 15:04:05 MST"))
	}
	return out
}

func TestScheduleNext(t *testing.T) {
	t.Parallel()
	berlin := mustLoc(t, "Europe/Berlin")
	shanghai := mustLoc(t, "Asia/Shanghai")
	utc := time.UTC
	tests := []struct {
		name string
		expr string
		loc  *time.Location
		from time.Time
		want []string
	}{
		{"5 fields", "30 2 * * *", utc, time.Date(2026, 1, 1, 2, 30, 0, 0, utc),
			[]string{"2026-01-02 02:30:00 UTC", "2026-01-03 02:30:00 UTC"}},
		{"6 fields, seconds first", "*/20 * * * * *", utc, time.Date(2026, 1, 1, 0, 0, 5, 0, utc),
			[]string{"2026-01-01 00:00:20 UTC", "2026-01-01 00:00:40 UTC", "2026-01-01 00:01:00 UTC"}},
		{"6 fields, fixed second", "15 30 2 * * *", utc, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2026-01-01 02:30:15 UTC", "2026-01-02 02:30:15 UTC"}},
		{"@every is aligned to the epoch", "@every 30s", utc, time.Date(2026, 1, 1, 0, 0, 10, 500, utc),
			[]string{"2026-01-01 00:00:30 UTC", "2026-01-01 00:01:00 UTC"}},
		{"@every 90m", "@every 90m", utc, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2026-01-01 01:30:00 UTC", "2026-01-01 03:00:00 UTC"}},
		{"@hourly", "@hourly", utc, time.Date(2026, 1, 1, 0, 59, 59, 0, utc),
			[]string{"2026-01-01 01:00:00 UTC", "2026-01-01 02:00:00 UTC"}},
		{"@daily in Shanghai", "@daily", shanghai, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2026-01-02 00:00:00 CST", "2026-01-03 00:00:00 CST"}},
		{"@weekly is Sunday", "@weekly", utc, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2026-01-04 00:00:00 UTC", "2026-01-11 00:00:00 UTC"}},
		{"@monthly", "@monthly", utc, time.Date(2026, 1, 15, 0, 0, 0, 0, utc),
			[]string{"2026-02-01 00:00:00 UTC", "2026-03-01 00:00:00 UTC"}},
		{"@yearly", "@yearly", utc, time.Date(2026, 1, 15, 0, 0, 0, 0, utc),
			[]string{"2027-01-01 00:00:00 UTC", "2028-01-01 00:00:00 UTC"}},
		{"names and ranges", "0 9 * JAN-FEB MON-FRI", utc, time.Date(2026, 1, 30, 10, 0, 0, 0, utc),
			[]string{"2026-02-02 09:00:00 UTC", "2026-02-03 09:00:00 UTC"}},
		{"day of month or day of week, as in cron", "0 0 10 * 5", utc, time.Date(2026, 2, 1, 0, 0, 0, 0, utc),
			[]string{"2026-02-06 00:00:00 UTC", "2026-02-10 00:00:00 UTC", "2026-02-13 00:00:00 UTC"}},
		{"31st skips short months", "0 0 31 * *", utc, time.Date(2026, 1, 31, 0, 0, 0, 0, utc),
			[]string{"2026-03-31 00:00:00 UTC", "2026-05-31 00:00:00 UTC"}},
		{"Feb 29 waits for leap years", "0 0 29 2 *", utc, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2028-02-29 00:00:00 UTC", "2032-02-29 00:00:00 UTC"}},
		{"last day of February", "0 0 L 2 *", utc, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2026-02-28 00:00:00 UTC", "2027-02-28 00:00:00 UTC", "2028-02-29 00:00:00 UTC"}},
		{"Berlin wall clock in winter", "30 2 * * *", berlin, time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			[]string{"2026-01-01 02:30:00 CET", "2026-01-02 02:30:00 CET"}},
		// 2026-03-29 02:00 CET -> 03:00 CEST: 02:30 does not exist. It runs
		// once, at the change (03:00 CEST), then on the next day at 02:30.
		{"DST gap runs at the change", "30 2 * * *", berlin, time.Date(2026, 3, 27, 12, 0, 0, 0, utc),
			[]string{"2026-03-28 02:30:00 CET", "2026-03-29 03:00:00 CEST", "2026-03-30 02:30:00 CEST"}},
		{"DST gap, every 15 min of hour 2 runs once", "*/15 2 * * *", berlin, time.Date(2026, 3, 29, 0, 0, 0, 0, utc),
			[]string{"2026-03-29 03:00:00 CEST", "2026-03-30 02:00:00 CEST"}},
		{"DST gap, a tick at 03:00 is the same run", "0 3 * * *", berlin, time.Date(2026, 3, 28, 12, 0, 0, 0, utc),
			[]string{"2026-03-29 03:00:00 CEST", "2026-03-30 03:00:00 CEST"}},
		// 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 happens twice; it runs once.
		{"DST fold runs once", "30 2 * * *", berlin, time.Date(2026, 10, 24, 12, 0, 0, 0, utc),
			[]string{"2026-10-25 02:30:00 CEST", "2026-10-26 02:30:00 CET"}},
		{"DST fold, every 20 min of hour 2 runs in the first pass only", "*/20 2 * * *", berlin, time.Date(2026, 10, 24, 23, 0, 0, 0, utc),
			[]string{"2026-10-25 02:00:00 CEST", "2026-10-25 02:20:00 CEST", "2026-10-25 02:40:00 CEST", "2026-10-26 02:00:00 CET"}},
		{"DST fold, hourly runs in both passes", "30 * * * *", berlin, time.Date(2026, 10, 24, 23, 45, 0, 0, utc),
			[]string{"2026-10-25 02:30:00 CEST", "2026-10-25 02:30:00 CET", "2026-10-25 03:30:00 CET"}},
		// Hourly jobs run in real time, as classic cron runs them: the hour
		// the gap skips is not run at the change (01:30 CET, then 03:30 CEST).
		{"DST gap, hourly skips the missing hour", "30 * * * *", berlin, time.Date(2026, 3, 29, 0, 15, 0, 0, utc),
			[]string{"2026-03-29 01:30:00 CET", "2026-03-29 03:30:00 CEST", "2026-03-29 04:30:00 CEST"}},
		{"DST gap, on the hour", "0 * * * *", berlin, time.Date(2026, 3, 28, 23, 30, 0, 0, utc),
			[]string{"2026-03-29 01:00:00 CET", "2026-03-29 03:00:00 CEST", "2026-03-29 04:00:00 CEST"}},
		{"DST gap, every 20 min", "*/20 * * * *", berlin, time.Date(2026, 3, 29, 0, 30, 0, 0, utc),
			[]string{"2026-03-29 01:40:00 CET", "2026-03-29 03:00:00 CEST", "2026-03-29 03:20:00 CEST"}},
		{"Berlin monthly across the spring change", "0 12 1 * *", berlin, time.Date(2026, 2, 1, 12, 0, 0, 0, berlin),
			[]string{"2026-03-01 12:00:00 CET", "2026-04-01 12:00:00 CEST", "2026-05-01 12:00:00 CEST"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ticks(mustSchedule(t, tc.expr, tc.loc), tc.from, len(tc.want), tc.loc)
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("ticks of %q after %v:\n got  %v\n want %v", tc.expr, tc.from, got, tc.want)
			}
		})
	}
}

// TestScheduleMatchesBruteForce checks next against a minute-by-minute walk
// with gronx.IsDue over the wall clock, for two days around each 2026
// zone change (and two days of a zone without one): every tick it returns
// is due, and no due minute is skipped, except within three hours of a
// change, where TestScheduleNext states the rules.
func TestScheduleMatchesBruteForce(t *testing.T) {
	t.Parallel()
	exprs := []string{"*/7 * * * *", "45 23 * * *"}
	for _, zone := range []string{"Asia/Shanghai", "America/New_York", "Europe/Berlin"} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			g := gronx.New()
			loc := mustLoc(t, zone)
			windows := []time.Time{time.Date(2026, 6, 1, 0, 0, 0, 0, loc)}
			for at := time.Date(2026, 1, 1, 0, 0, 0, 0, loc); ; {
				_, end := at.ZoneBounds()
				if end.IsZero() || end.Year() != 2026 {
					break
				}
				windows = append(windows, end.Add(-24*time.Hour))
				at = end
			}
			for _, expr := range exprs {
				s := mustSchedule(t, expr, loc)
				for _, start := range windows {
					end := start.Add(48 * time.Hour)
					got := map[int64]bool{}
					for at := s.Next(start); at.Before(end); at = s.Next(at) {
						got[at.Unix()] = true
					}
					if len(got) < 2 {
						t.Fatalf("%q: only %d ticks in two days", expr, len(got))
					}
					for m := start.Add(time.Minute); m.Before(end); m = m.Add(time.Minute) {
						_, off := m.Zone()
						_, offBefore := m.Add(-3 * time.Hour).Zone()
						_, offAfter := m.Add(3 * time.Hour).Zone()
						if off != offBefore || off != offAfter {
							continue
						}
						wall := time.Date(m.Year(), m.Month(), m.Day(), m.Hour(), m.Minute(), 0, 0, time.UTC)
						if due, _ := g.IsDue(expr, wall); due != got[m.Unix()] {
							t.Errorf("%q at %v: due %v, but next returned it: %v", expr, m, due, got[m.Unix()])
						}
					}
				}
			}
		})
	}
}

func TestParseScheduleErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ expr, want string }{
		{"61 * * * *", `minute field "61"`},
		{"* 24 * * *", `hour field "24"`},
		{"* * 0 * *", `day-of-month field "0"`},
		{"* * * 13 *", `month field "13"`},
		{"* * * * 8", `day-of-week field "8"`},
		{"* * * *", "has 4 fields"},
		{"0 0 1 1 * 2026", `day-of-week field "2026"`},
		{"1-2-3 * * * *", `minute field "1-2-3"`},
		{"5-1 * * * *", "runs backwards"},
		{"*/0 * * * *", "step"},
		{"L * * * *", `minute field "L"`},
		{"0 0 30 2 *", "never fires"},
		{"@every 500ms", "at least 1s"},
		{"@every soon", `@every takes a duration like @every 30s or @every 1h; "soon" is not one`},
		{"@every 9999999h", `"9999999h" is not one (at most 2562047h0m0s)`},
		{"@every -5s", "at least 1s"},
		{"@fortnightly", "unknown descriptor"},
		{"60 * * * * *", `second field "60"`},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSchedule(tc.expr, time.UTC)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseSchedule(%q) = %v, want an error containing %q", tc.expr, err, tc.want)
			}
		})
	}
}

func TestScheduleLast(t *testing.T) {
	t.Parallel()
	utc := time.UTC
	s := mustSchedule(t, "*/10 * * * * *", utc) // every 10 s
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, utc)
	tests := []struct {
		now  time.Time
		want time.Time
	}{
		{since.Add(5 * time.Second), time.Time{}},
		{since.Add(10 * time.Second), since.Add(10 * time.Second)},
		{since.Add(3*time.Hour + 15*time.Second), since.Add(3*time.Hour + 10*time.Second)},
		{since.Add(40*24*time.Hour + 9*time.Second), since.Add(40 * 24 * time.Hour)},
	}
	for _, tc := range tests {
		if got := s.Last(since, tc.now); !got.Equal(tc.want) {
			t.Errorf("Last(since, %v) = %v, want %v", tc.now, got, tc.want)
		}
	}
	every := mustSchedule(t, "@every 10s", utc)
	for _, tc := range tests {
		if got := every.Last(since, tc.now); !got.Equal(tc.want) {
			t.Errorf("@every Last(since, %v) = %v, want %v", tc.now, got, tc.want)
		}
	}
	yearly := mustSchedule(t, "@yearly", utc)
	if got, want := yearly.Last(since.AddDate(-3, 0, 0), since.AddDate(0, 6, 0)), since; !got.Equal(want) {
		t.Errorf("yearly Last = %v, want %v", got, want)
	}
}

// benchJobs is a mix of schedules and zones, all firing at least weekly so
// that stepping minute by minute finds each within a week.
func benchJobs(b *testing.B) (exprs []string, locs []*time.Location) {
	forms := []string{"*/5 * * * *", "30 2 * * *", "0 */3 * * *", "15,45 9-17 * * 1-5", "0 0 * * *", "7 * * * *", "*/15 8-20 * * *", "59 23 * * *"}
	zones := []string{"UTC", "Europe/Berlin", "Asia/Shanghai", "America/New_York"}
	for i := range 1000 {
		exprs = append(exprs, forms[i%len(forms)])
		locs = append(locs, mustLoc(b, zones[(i/len(forms))%len(zones)]))
	}
	return exprs, locs
}

// BenchmarkNextTick computes the next tick of 1000 jobs per op, three ways:
// this package (gronx over wall-clock time plus the DST mapping), gronx
// called directly in the job's zone (the floor: no DST rules), and
// stepping minute by minute with gronx.IsDue (the fallback the brief named).
func BenchmarkNextTick(b *testing.B) {
	exprs, locs := benchJobs(b)
	from := time.Date(2026, 3, 28, 23, 59, 30, 0, time.UTC)
	b.Run("expect", func(b *testing.B) {
		scheds := make([]*Schedule, len(exprs))
		for i := range exprs {
			scheds[i] = mustSchedule(b, exprs[i], locs[i])
		}
		b.ReportAllocs()
		for b.Loop() {
			for _, s := range scheds {
				if s.Next(from).IsZero() {
					b.Fatal("no tick")
				}
			}
		}
	})
	b.Run("gronx-direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, e := range exprs {
				if _, err := gronx.NextTickAfter(e, from.In(locs[i]), false); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("isdue-stepping", func(b *testing.B) {
		g := gronx.New()
		b.ReportAllocs()
		for b.Loop() {
			for i, e := range exprs {
				t := from.In(locs[i]).Truncate(time.Minute).Add(time.Minute)
				for n := 0; ; n++ {
					if ok, _ := g.IsDue(e, t); ok {
						break
					}
					if n > 7*24*60 {
						b.Fatalf("%q not due within a week", e)
					}
					t = t.Add(time.Minute)
				}
			}
		}
	})
}

// FuzzParseSchedule: any string either is refused or yields a schedule
// whose ticks move strictly forward, in any zone.
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"30 2 * * *", "*/15 * * * * *", "@every 90s", "@hourly", "0 0 L * *", "0 9 * JAN-MAR MON-FRI",
		"0 0 15W * *", "0 22 * * 5L", "0 0 * * 1#2", "0 0 ? * *", "1-5/2 */3 1,15 * 0", "0 0 30 2 *", "@every -1s", "* * * * * * *"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(3))
	}
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"}
	f.Fuzz(func(t *testing.T, expr string, zone uint8) {
		loc := mustLoc(t, zones[int(zone)%len(zones)])
		s, err := ParseSchedule(expr, loc)
		if err != nil {
			return
		}
		at := time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC)
		for range 5 {
			n := s.Next(at)
			if n.IsZero() {
				return
			}
			if !n.After(at) {
				t.Fatalf("%q: next(%v) = %v, not after", expr, at, n)
			}
			at = n
		}
	})
}

func TestScheduleString(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{"@every 1h": "@every 1h0m0s", " 30 2 * * * ": " 30 2 * * * ", "@daily": "@daily"} {
		if got := mustSchedule(t, expr, time.UTC).String(); got != want {
			t.Errorf("%q: String() = %q, want %q", expr, got, want)
		}
	}
}
