package expect_test

import (
	"errors"
	"fmt"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/expect"
)

// Parse reports every problem of an expectations file at once, each with
// its line and column, job and field.
func ExampleParse() {
	src := `
expectations:
  - job: backup
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    grace: 10 minutes
  - job: report
    every: 1h
    upstream: [report]
`
	_, err := expect.Parse("expect.yaml", []byte(src))
	var fe *expect.FileError
	if errors.As(err, &fe) {
		for _, issue := range fe.Issues {
			fmt.Println(issue)
		}
	}
	// Output:
	// expect.yaml:6:12: job "backup": grace: "10 minutes" is not a duration (write a number with a unit, like 30s, 10m or 1h30m, or 0)
	// expect.yaml:9:16: job "report": upstream.0: a job cannot depend on itself (remove it from upstream)
}

// A daily 02:30 job in Berlin, watched over the night the clocks go
// forward: 02:30 does not exist, so the run is expected at the change,
// 03:00 CEST. The job did not run that night; the next night it ran, but
// too long.
func ExampleEvaluator() {
	set, err := expect.Parse("expect.yaml", []byte(`
expectations:
  - job: backup
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    grace: 10m
    max_runtime: 1h
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	clock := apollo.NewFakeClock(time.Date(2026, 3, 28, 12, 0, 0, 0, berlin))
	ev := expect.NewEvaluator()
	ev.Set("", set, clock.Now())
	started := time.Date(2026, 3, 30, 2, 31, 0, 0, berlin)
	for range 2 * 24 * 60 { // two days, a tick a minute
		clock.Advance(time.Minute)
		if clock.Now().Equal(started) {
			ev.Started(expect.Run{Job: "backup", TaskID: "backup#2", At: started})
		}
		for _, e := range ev.Tick(clock.Now()) {
			fmt.Printf("%s %s %s: %s\n", e.At.In(berlin).Format("01-02 15:04"), e.Kind, e.Job, e.Detail)
		}
	}
	// Output:
	// 03-29 03:10 missed backup: no run started by 2026-03-29 03:10:00 CEST (expected 2026-03-29 03:00:00 CEST, grace 10m)
	// 03-30 03:31 too_long backup: still running after max_runtime 1h (started 2026-03-30 02:31:00 CEST)
}

// Learning a schedule from twenty nightly runs that start a little after
// 02:00.
func ExampleSuggest() {
	var starts []time.Time
	var durations []time.Duration
	for day := range 20 {
		at := time.Date(2026, 3, 1+day, 2, 0, 0, 0, time.UTC)
		starts = append(starts, at.Add(time.Duration(day%4*15)*time.Second))
		durations = append(durations, 4*time.Minute+time.Duration(day%5)*10*time.Second)
	}
	p, ok := expect.Suggest("nightly_backup", starts, durations, time.UTC)
	fmt.Println(ok, p.Describe, p.Confidence)
	fmt.Printf("schedule %q grace %v max_runtime %v min_runtime %v\n", p.Schedule, p.Grace, p.MaxRuntime, p.MinRuntime)
	// Output:
	// true daily at 02:00 1
	// schedule "0 2 * * *" grace 2m0s max_runtime 7m0s min_runtime 2m0s
}

// Two report jobs load after transform, which runs after extract. While
// extract is down, the alerts of everything below it are its echoes.
func ExampleEvaluator_InhibitedBy() {
	set, _ := expect.Parse("expect.yaml", []byte(`
expectations:
  - {job: extract, schedule: "0 2 * * *"}
  - {job: transform, upstream: [extract]}
  - {job: report_sales, upstream: [transform]}
  - {job: report_stock, upstream: [transform]}
`))
	t0 := time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)
	ev := expect.NewEvaluator()
	ev.Set("", set, t0)
	ev.Finished(expect.Run{Job: "extract", At: t0.Add(2 * time.Hour), Status: apollo.StatusFailed})
	ev.Finished(expect.Run{Job: "transform", At: t0.Add(3 * time.Hour), Status: apollo.StatusTimeout})
	for _, job := range []string{"report_sales", "report_stock", "transform", "extract"} {
		fmt.Println(job, ev.InhibitedBy("", job))
	}
	ev.Finished(expect.Run{Job: "extract", At: t0.Add(4 * time.Hour), Status: apollo.StatusSuccess})
	fmt.Println("after extract recovers:", ev.InhibitedBy("", "report_sales"))
	// Output:
	// report_sales [extract (failed)]
	// report_stock [extract (failed)]
	// transform [extract (failed)]
	// extract []
	// after extract recovers: [transform (timeout)]
}
