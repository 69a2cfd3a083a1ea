package expect

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MinRuns is how many runs learning needs before it proposes anything.
const MinRuns = 10

// Proposal is an expectation learned from a job's history, and how sure
// the learning is. Nothing is enforced until someone accepts it (makes it
// an expectation).
type Proposal struct {
	// Expectation holds what was found: Schedule and Timezone, or Every,
	// with Grace; MaxRuntime and MinRuntime. What was not found is zero.
	Expectation
	// Describe says it for people: "daily at 02:00", "every 15m".
	Describe string
	// Confidence, from 0 to 1, is the share of the observed runs that fit
	// the schedule, scaled down when fewer than 20 runs were seen.
	Confidence float64
	// Runs and Durations are how many starts and how many successful
	// runs' durations it was learned from.
	Runs, Durations int
}

// nicePeriods are the periods people schedule jobs at; a learned period
// near one of them is taken to be it.
var nicePeriods = []time.Duration{
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 10 * time.Minute,
	12 * time.Minute, 15 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour,
	4 * time.Hour, 6 * time.Hour, 8 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
}

const (
	week = 7 * 24 * time.Hour
	day  = 24 * time.Hour
)

// Suggest learns an expectation for job from the start times of its runs
// and the durations of its successful runs, reading wall-clock times in
// loc (nil: UTC). It proposes:
//
//   - a schedule, when at least MinRuns starts come at a regular period
//     (at least 80% of the gaps between them are the period, or two or
//     three periods when runs were skipped): a cron expression ("daily at
//     02:00", "hourly at :07", "weekdays at 09:00") when the period is an
//     hour or more, divides a day or is a week, and the starts keep to one
//     time of the period; otherwise a period ("every 15m"). The time is
//     the roundest minute within the jitter of the starts, so that runs
//     that start a few seconds after 02:00 propose 02:00, not 02:01;
//   - a grace of 1.5 times the 99th percentile of how far starts strayed
//     from the schedule, at least a minute;
//   - runtime bounds, from at least MinRuns durations: max_runtime 1.5
//     times their 99th percentile, min_runtime half their 1st.
//
// ok is false when there is nothing to propose, or no expectation can
// name job (CheckJob).
func Suggest(job string, starts []time.Time, durations []time.Duration, loc *time.Location) (Proposal, bool) {
	if unnameable(job) {
		return Proposal{}, false // no expectation can name it (CheckJob)
	}
	if loc == nil {
		loc = time.UTC
	}
	p := Proposal{Expectation: Expectation{Job: job}, Runs: len(starts), Durations: len(durations)}
	found := learnSchedule(&p, starts, loc)
	bounds := learnBounds(&p, durations)
	if !found && bounds {
		p.Describe = fmt.Sprintf("no regular schedule in %d runs", len(starts))
		p.Confidence = round2(min(1, float64(len(durations))/20))
	}
	return p, found || bounds
}

// learnSchedule finds a period, and a cron schedule when it can.
func learnSchedule(p *Proposal, starts []time.Time, loc *time.Location) bool {
	if len(starts) < MinRuns {
		return false
	}
	ts := slices.Clone(starts)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []time.Duration
	for i := 1; i < len(ts); i++ {
		if g := ts[i].Sub(ts[i-1]); g > 0 {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) < MinRuns-1 {
		return false
	}
	// The period people chose, when one is near; else the one measured.
	// The nearest nice period is 10% away at most, and so can be a wrong
	// one (4m30s is within 10% of 5m): the measured one is tried next.
	measured := percentile(gaps, 50)
	var (
		period, tried time.Duration
		share         float64
		slips         []time.Duration
	)
	for _, period = range []time.Duration{nicePeriod(measured), roundPeriod(measured)} {
		if period < time.Second || period == tried {
			continue
		}
		tried = period
		if share, slips = fitPeriod(gaps, period); share >= 0.8 && len(slips)*2 >= len(gaps) {
			break
		}
		share = 0
	}
	if share == 0 {
		return false
	}
	scale := min(1, float64(len(ts))/20)
	if cronPeriod(period) {
		if c, ok := learnCron(ts, period, loc); ok {
			p.Schedule, p.Timezone, p.Describe = c.expr, loc.String(), c.describe
			p.Grace = graceFor(c.devs)
			p.Confidence = round2(share * c.concentration * scale)
			return true
		}
	}
	p.Every, p.Describe = period, "every "+formatDuration(period)
	p.Grace = graceFor(slips)
	p.Confidence = round2(share * scale)
	return true
}

// fitPeriod is the share of the gaps that are one, two or three periods
// (runs skipped), within a tenth of the period, and how far each single
// one strayed from it.
func fitPeriod(gaps []time.Duration, period time.Duration) (share float64, slips []time.Duration) {
	tol := period / 10
	fit := 0
	for _, g := range gaps {
		for k := time.Duration(1); k <= 3; k++ {
			if d := absDuration(g - k*period); d <= tol {
				fit++
				if k == 1 {
					slips = append(slips, d)
				}
				break
			}
		}
	}
	return float64(fit) / float64(len(gaps)), slips
}

// nicePeriod snaps a period to the nearest one people use when it is
// within 10% of it; otherwise it rounds it (roundPeriod).
func nicePeriod(d time.Duration) time.Duration {
	best := time.Duration(0)
	for _, n := range nicePeriods {
		if absDuration(d-n) <= n/10 && (best == 0 || absDuration(d-n) < absDuration(d-best)) {
			best = n
		}
	}
	if best != 0 {
		return best
	}
	return roundPeriod(d)
}

// roundPeriod is a measured period to the second, or to the minute when
// that is as near as a start's slip: @every 90s is not every 2m.
func roundPeriod(d time.Duration) time.Duration {
	if m := d.Round(time.Minute); m > 0 && absDuration(d-m) <= d/20 {
		return m
	}
	return d.Round(time.Second)
}

// cronPeriod reports whether a cron expression can say "every period at a
// fixed time": hours that divide a day, a day, a week.
func cronPeriod(p time.Duration) bool {
	return p == week || p >= time.Hour && p <= day && p%time.Hour == 0 && day%p == 0
}

type learnedCron struct {
	expr, describe string
	devs           []time.Duration // each start's distance from its expected time
	concentration  float64         // 1: every start at the same time of the period
}

// learnCron finds the time within the period at which the starts come,
// and writes it as cron. The starts are read on the wall clock of loc, so
// a daily 02:00 job stays at 02:00 across a DST change.
func learnCron(ts []time.Time, period time.Duration, loc *time.Location) (learnedCron, bool) {
	offs := make([]float64, len(ts)) // seconds into the period, wall clock
	var sumSin, sumCos float64
	ps := period.Seconds()
	for i, t := range ts {
		w := t.In(loc)
		o := float64(w.Hour()*3600 + w.Minute()*60 + w.Second())
		if period == week {
			o += float64(int(w.Weekday()) * 86400)
		}
		offs[i] = math.Mod(o, ps)
		a := 2 * math.Pi * offs[i] / ps
		sumSin, sumCos = sumSin+math.Sin(a), sumCos+math.Cos(a)
	}
	n := float64(len(ts))
	concentration := math.Hypot(sumSin, sumCos) / n
	mean := math.Mod(math.Atan2(sumSin, sumCos)/(2*math.Pi)*ps+ps, ps)
	devs := make([]float64, len(offs)) // from the mean, in (-period/2, period/2]
	for i, o := range offs {
		devs[i] = wrap(o-mean, ps)
	}
	sorted := slices.Clone(devs)
	slices.Sort(sorted)
	// The starts must keep to one time: 90% of them within an eighth of
	// the period of their mean, and never more than half an hour.
	spread := math.Max(math.Abs(sorted[int(0.05*n)]), math.Abs(sorted[int(math.Ceil(0.95*n))-1]))
	if spread > math.Min(ps/8, 1800) {
		return learnedCron{}, false
	}
	// Runs start at their time or a little after it: look for the time
	// from a minute before the earliest tenth of the starts to their
	// median, and take the roundest minute there.
	lo := mean + sorted[int(0.1*n)] - 60
	hi := mean + sorted[len(sorted)/2]
	at, ok := roundestMinute(lo, hi, mean+sorted[len(sorted)/2])
	if !ok {
		return learnedCron{}, false
	}
	at = math.Mod(at+ps, ps)
	lc := learnedCron{concentration: concentration}
	minute := int(at) / 60
	mm := minute % 60
	switch {
	case period == time.Hour:
		lc.expr, lc.describe = fmt.Sprintf("%d * * * *", mm), fmt.Sprintf("hourly at :%02d", mm)
	case period == day:
		hh := minute / 60
		dows := weekdays(ts, loc)
		lc.expr = fmt.Sprintf("%d %d * * %s", mm, hh, cmp.Or(dows.cron, "*"))
		lc.describe = fmt.Sprintf("%s at %02d:%02d", cmp.Or(dows.words, "daily"), hh, mm)
	case period == week:
		d, hh := minute/(24*60), minute/60%24
		lc.expr = fmt.Sprintf("%d %d * * %d", mm, hh, d)
		lc.describe = fmt.Sprintf("weekly on %s at %02d:%02d", time.Weekday(d), hh, mm)
	default:
		step := int(period / time.Hour)
		var hours []string
		for h := minute / 60 % step; h < 24; h += step {
			hours = append(hours, strconv.Itoa(h))
		}
		lc.expr = fmt.Sprintf("%d %s * * *", mm, strings.Join(hours, ","))
		lc.describe = fmt.Sprintf("every %dh from %02d:%02d", step, minute/60%step, mm)
	}
	// How far each start strayed from its expected run, by the schedule
	// itself: on the night of a DST change the run is expected at the
	// change, and a start there is on time.
	sched, err := ParseSchedule(lc.expr, loc)
	if err != nil {
		return learnedCron{}, false
	}
	for _, t := range ts {
		lc.devs = append(lc.devs, t.Sub(sched.Next(t.Add(-period/2))))
	}
	return lc, true
}

// wrap brings x into (-p/2, p/2].
func wrap(x, p float64) float64 {
	x = math.Mod(x, p)
	switch {
	case x > p/2:
		x -= p
	case x <= -p/2:
		x += p
	}
	return x
}

// roundestMinute returns the whole minute in [lo, hi] (seconds) that
// people would most likely have written: a whole hour, then half an hour,
// a quarter, ten minutes, five, one; among equals the one nearest to near.
func roundestMinute(lo, hi, near float64) (float64, bool) {
	best, bestRank := 0.0, -1
	for m := math.Ceil(lo / 60); m*60 <= hi; m++ {
		rank := 0
		for r, step := range []int{5, 10, 15, 30, 60} {
			if int(math.Mod(m+1440*7, float64(step))) == 0 {
				rank = r + 1
			}
		}
		if rank > bestRank || rank == bestRank && math.Abs(m*60-near) < math.Abs(best-near) {
			best, bestRank = m*60, rank
		}
	}
	return best, bestRank >= 0
}

type weekdaySet struct{ cron, words string }

// weekdays finds the days of the week a daily job skips: over at least
// two weeks, days with no run while the others have at least two each.
func weekdays(ts []time.Time, loc *time.Location) weekdaySet {
	if ts[len(ts)-1].Sub(ts[0]) < 13*day {
		return weekdaySet{}
	}
	var count [7]int
	for _, t := range ts {
		count[t.In(loc).Weekday()]++
	}
	var on []int
	for d, c := range count {
		switch {
		case c >= 2:
			on = append(on, d)
		case c == 1:
			return weekdaySet{} // a day with one run is noise, not a rule
		}
	}
	switch {
	case len(on) == 7:
		return weekdaySet{}
	case slices.Equal(on, []int{1, 2, 3, 4, 5}):
		return weekdaySet{cron: "1-5", words: "weekdays"}
	case slices.Equal(on, []int{0, 6}):
		return weekdaySet{cron: "0,6", words: "weekends"}
	}
	nums := make([]string, len(on))
	names := make([]string, len(on))
	for i, d := range on {
		nums[i], names[i] = strconv.Itoa(d), time.Weekday(d).String()[:3]
	}
	return weekdaySet{cron: strings.Join(nums, ","), words: "on " + strings.Join(names, ", ")}
}

// graceFor is 1.5 times the 99th percentile of how far starts strayed,
// rounded up to the minute, at least a minute.
func graceFor(devs []time.Duration) time.Duration {
	abs := make([]time.Duration, len(devs))
	for i, d := range devs {
		abs[i] = absDuration(d)
	}
	g := time.Duration(1.5 * float64(percentile(abs, 99)))
	return max(time.Minute, ceilTo(g, time.Minute))
}

// learnBounds proposes max_runtime and min_runtime from the durations.
func learnBounds(p *Proposal, durations []time.Duration) bool {
	if len(durations) < MinRuns {
		return false
	}
	hi := time.Duration(1.5 * float64(percentile(durations, 99)))
	unit := time.Second
	if hi >= 10*time.Minute {
		unit = time.Minute
	}
	p.MaxRuntime = max(time.Second, ceilTo(hi, unit))
	if lo := (percentile(durations, 1) / 2).Truncate(time.Second); lo >= time.Second && lo < p.MaxRuntime {
		p.MinRuntime = lo
	}
	return true
}

// percentile is the nearest-rank percentile q (0..100) of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ceilTo(d, unit time.Duration) time.Duration {
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
