package expect

import (
	"math/rand/v2"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// jitter is how far each synthetic start strays from its time, in
// seconds, cycling: early and late, up to a minute and a half.
var jitter = []int{-90, -40, 0, 3, 12, 35, 60, 88, -15, 7}

// daily returns n starts at hh:mm on consecutive days in loc, each moved
// by the jitter.
func daily(n int, from time.Time, hh, mm int, loc *time.Location) []time.Time {
	var ts []time.Time
	for i := range n {
		d := from.AddDate(0, 0, i)
		at := time.Date(d.Year(), d.Month(), d.Day(), hh, mm, 0, 0, loc)
		ts = append(ts, at.Add(time.Duration(jitter[i%len(jitter)])*time.Second))
	}
	return ts
}

// scheduled returns the first n ticks of a schedule after from, as the
// scheduler runs them, each moved by the jitter.
func scheduled(t *testing.T, n int, expr string, loc *time.Location, from time.Time) []time.Time {
	s, err := ParseSchedule(expr, loc)
	if err != nil {
		t.Fatal(err)
	}
	var ts []time.Time
	for i, at := 0, s.Next(from); i < n; i, at = i+1, s.Next(at) {
		ts = append(ts, at.Add(time.Duration(jitter[i%len(jitter)])*time.Second))
	}
	return ts
}

// fiveMinutes returns n durations of 5m, give or take 30s.
func fiveMinutes(n int) []time.Duration {
	var ds []time.Duration
	for i := range n {
		ds = append(ds, 5*time.Minute+time.Duration(i%7-3)*10*time.Second)
	}
	return ds
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var every15, hourly, sixHours, weekdays, weekly, late, slow, every90s, every270s, every45s []time.Time
	for i := range 30 {
		// @every 90s and the like: a period off the minute, a start now
		// and then a few seconds late. 4m30s is within 10% of 5m, a
		// period people use, and is still not it.
		slip := time.Duration(i%4/3*3) * time.Second
		every90s = append(every90s, t0.Add(time.Duration(i)*90*time.Second+slip))
		every270s = append(every270s, t0.Add(time.Duration(i)*270*time.Second+slip))
		every45s = append(every45s, t0.Add(time.Duration(i)*45*time.Second+slip))
		every15 = append(every15, t0.Add(3*time.Minute+time.Duration(i)*15*time.Minute+time.Duration(jitter[i%10]/5)*time.Second))
		hourly = append(hourly, t0.Add(time.Duration(i)*time.Hour+7*time.Minute+time.Duration(jitter[i%10]/10)*time.Second))
		sixHours = append(sixHours, t0.Add(2*time.Hour+time.Duration(i)*6*time.Hour+time.Duration(i%3)*time.Second))
		late = append(late, time.Date(2026, 3, 1+i, 2, 0, 0, 0, time.UTC).Add(time.Duration(i%10*9)*time.Second))
		slow = append(slow, t0.Add(time.Duration(i)*97*time.Minute)) // no period people use
	}
	for d := 0; len(weekdays) < 20; d++ {
		at := time.Date(2026, 3, 2+d, 9, 0, 30, 0, time.UTC) // 2026-03-02 is a Monday
		if wd := at.Weekday(); wd != time.Saturday && wd != time.Sunday {
			weekdays = append(weekdays, at)
		}
	}
	for i := range 12 {
		weekly = append(weekly, time.Date(2026, 1, 5+7*i, 23, 45, 10, 0, time.UTC)) // Mondays
	}
	tests := []struct {
		name      string
		starts    []time.Time
		loc       *time.Location
		schedule  string
		every     time.Duration
		describe  string
		grace     time.Duration
		minConfid float64
	}{
		{"daily at 02:00 with jitter", daily(20, t0, 2, 0, time.UTC), nil, "0 2 * * *", 0, "daily at 02:00", 3 * time.Minute, 0.95},
		{"always a little late: still 02:00", late, nil, "0 2 * * *", 0, "daily at 02:00", 3 * time.Minute, 0.95},
		// Across 2026-03-29, when 02:30 does not exist in Berlin: the run
		// that night comes at the change, on time by the schedule.
		{"daily at 02:30 Berlin across DST", scheduled(t, 20, "30 2 * * *", berlin, time.Date(2026, 3, 20, 0, 0, 0, 0, berlin)), berlin, "30 2 * * *", 0, "daily at 02:30", 3 * time.Minute, 0.9},
		{"every 15m", every15, nil, "", 15 * time.Minute, "every 15m", time.Minute, 0.95},
		{"hourly at :07", hourly, nil, "7 * * * *", 0, "hourly at :07", time.Minute, 0.95},
		{"every 6 hours", sixHours, nil, "0 2,8,14,20 * * *", 0, "every 6h from 02:00", time.Minute, 0.95},
		{"weekdays", weekdays, nil, "0 9 * * 1-5", 0, "weekdays at 09:00", time.Minute, 0.75},
		{"weekly", weekly, nil, "45 23 * * 1", 0, "weekly on Monday at 23:45", time.Minute, 0.55},
		{"a period nobody schedules", slow, nil, "", 97 * time.Minute, "every 1h37m", time.Minute, 0.95},
		{"every 90s", every90s, nil, "", 90 * time.Second, "every 1m30s", time.Minute, 0.6},
		{"every 4m30s", every270s, nil, "", 270 * time.Second, "every 4m30s", time.Minute, 0.6},
		{"every 45s", every45s, nil, "", 45 * time.Second, "every 45s", time.Minute, 0.6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, ok := Suggest("job", tc.starts, nil, tc.loc)
			if !ok || p.Schedule != tc.schedule || p.Every != tc.every || p.Describe != tc.describe || p.Grace != tc.grace {
				t.Fatalf("Suggest = %+v, %v\nwant schedule %q every %v (%s) grace %v", p, ok, tc.schedule, tc.every, tc.describe, tc.grace)
			}
			if p.Confidence < tc.minConfid || p.Confidence > 1 {
				t.Errorf("confidence %v, want at least %v", p.Confidence, tc.minConfid)
			}
			if tc.schedule != "" {
				want := "UTC"
				if tc.loc != nil {
					want = tc.loc.String()
				}
				if p.Timezone != want {
					t.Errorf("timezone %q, want %q", p.Timezone, want)
				}
			}
			// What is proposed is an expectation a set accepts.
			if _, err := NewSet([]Expectation{p.Expectation}); err != nil {
				t.Errorf("the proposal is not a valid expectation: %v", err)
			}
		})
	}
}

func TestSuggestRuntimeBounds(t *testing.T) {
	t.Parallel()
	p, ok := Suggest("job", daily(20, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 2, 0, time.UTC), fiveMinutes(20), nil)
	// p99 of the durations is 5m30s: max_runtime 1.5 times it; p1 is
	// 4m30s: min_runtime half of it.
	if !ok || p.MaxRuntime != 8*time.Minute+15*time.Second || p.MinRuntime != 2*time.Minute+15*time.Second {
		t.Errorf("bounds = %v, %v (%v)", p.MaxRuntime, p.MinRuntime, ok)
	}
	long := []time.Duration{}
	for i := range 15 {
		long = append(long, 2*time.Hour+time.Duration(i)*time.Minute)
	}
	if p, _ := Suggest("job", nil, long, nil); p.MaxRuntime != 3*time.Hour+21*time.Minute || p.Durations != 15 {
		t.Errorf("long runs: max_runtime %v, want 1.5 × 2h14m rounded up to the minute", p.MaxRuntime)
	}
	quick := make([]time.Duration, 12)
	for i := range quick {
		quick[i] = 300 * time.Millisecond
	}
	if p, _ := Suggest("job", nil, quick, nil); p.MaxRuntime != time.Second || p.MinRuntime != 0 {
		t.Errorf("quick runs: %v %v, want max_runtime 1s, no min_runtime", p.MaxRuntime, p.MinRuntime)
	}
}

func TestSuggestNothing(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var noise []time.Time
	for range 40 {
		noise = append(noise, t0.Add(time.Duration(r.Int64N(int64(10*24*time.Hour)))))
	}
	if p, ok := Suggest("job", noise, nil, nil); ok {
		t.Errorf("noise gave %+v", p)
	}
	// Noise with regular durations: bounds, but no schedule.
	p, ok := Suggest("job", noise, fiveMinutes(12), nil)
	if !ok || p.Schedule != "" || p.Every != 0 || p.Grace != 0 || p.MaxRuntime == 0 || p.Describe != "no regular schedule in 40 runs" {
		t.Errorf("noise with durations gave %+v, %v", p, ok)
	}
	// Daily runs at wandering times: a period, but no time of day.
	var wander []time.Time
	for i := range 20 {
		wander = append(wander, time.Date(2026, 3, 1+i, 2, 0, 0, 0, time.UTC).Add(time.Duration(i%5)*40*time.Minute))
	}
	if p, ok := Suggest("job", wander, nil, nil); ok && p.Schedule != "" {
		t.Errorf("wandering daily runs gave schedule %q", p.Schedule)
	}
	if p, ok := Suggest("job", daily(MinRuns-1, t0, 2, 0, time.UTC), fiveMinutes(MinRuns-1), nil); ok {
		t.Errorf("%d runs gave %+v", MinRuns-1, p)
	}
}

// TestLearner: memory per job is bounded (the last SampleSize runs are
// what it learns from), jobs are per tenant, and past MaxJobs new jobs are
// counted, not kept.
func TestLearner(t *testing.T) {
	t.Parallel()
	l := NewLearner(3)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// 200 days: at 05:00 for the first 130, then at 02:00. The sample
	// only holds the last 64, all at 02:00.
	for i := range 200 {
		hh := 5
		if i >= 130 {
			hh = 2
		}
		at := time.Date(2025, 1, 1+i, hh, 0, 0, 0, time.UTC)
		l.Started(Run{Tenant: "a", Job: "nightly", At: at})
		l.Finished(Run{Tenant: "a", Job: "nightly", At: at.Add(time.Minute), Status: apollo.StatusSuccess, Duration: time.Minute})
		l.Finished(Run{Tenant: "a", Job: "nightly", At: at.Add(time.Minute), Status: apollo.StatusFailed, Duration: time.Hour})
		if i%2 == 0 {
			l.Started(Run{Tenant: "b", Job: "nightly", At: at.Add(30 * time.Minute)})
		}
	}
	p, ok := l.Suggest("a", "nightly", nil)
	if !ok || p.Schedule != "0 2 * * *" || p.Runs != SampleSize || p.Durations != SampleSize || p.MaxRuntime != 90*time.Second {
		t.Errorf("a: %+v, %v", p, ok)
	}
	// b ran every other day at 05:30, then 02:30: a 2-day period is no
	// cron schedule.
	if p, ok := l.Suggest("b", "nightly", nil); !ok || p.Every != 48*time.Hour {
		t.Errorf("b: %+v, %v", p, ok)
	}
	l.Started(Run{Tenant: "a", Job: "third", At: t0})
	l.Started(Run{Tenant: "a", Job: "fourth", At: t0})
	l.Started(Run{Tenant: "a", Job: "fifth", At: t0})
	if st := l.Stats(); st.Jobs != 3 || st.Dropped != 2 {
		t.Errorf("Stats = %d jobs, %d dropped; want 3 and 2", st.Jobs, st.Dropped)
	}
	if n := l.ForgetBefore(t0.AddDate(0, 1, 0)); n != 1 {
		t.Errorf("ForgetBefore dropped %d, want the job last seen at the start", n)
	}
	l.Forget("b", "nightly")
	if _, ok := l.Suggest("b", "nightly", nil); ok {
		t.Error("Forget did not forget")
	}
	if st := l.Stats(); st.Jobs != 1 {
		t.Errorf("%d jobs left, want 1", st.Jobs)
	}
}
