package alert_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// Over real metrics: "count == 0" catches a job that stopped running
// (it ran two hours ago, so it still has a row in the table), for the
// prefix as a whole and per job with BY: name; a rate over a job that did
// not run is undefined and does not fire.
func TestCountZeroCatchesAStoppedJob(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	agg := newAggregator(t, clock)
	now := t0.UnixMilli()
	finish(agg, "", "export_hourly", "h1", apollo.StatusSuccess, now-2*3600_000, 5000)
	finish(agg, "", "export_daily", "d1", apollo.StatusSuccess, now-10*60_000, 5000)
	finish(agg, "", "export_flaky", "f1", apollo.StatusFailed, now-5*60_000, 5000)
	f := newFixture(t, `
RULE hourly_export_silent task_prefix: "export_hourly" WINDOW: 70m THRESHOLD: count == 0 NOTIFY: email
RULE export_silent task_prefix: "export_" BY: name WINDOW: 70m THRESHOLD: count == 0 NOTIFY: email
RULE export_unhealthy task_prefix: "export_" BY: name WINDOW: 70m THRESHOLD: success_rate < 90% NOTIFY: email
`, agg, nil)
	f.clock = clock
	f.eval(0)
	got := map[string]string{}
	for _, a := range f.eng.Alerts("", apollo.AlertFiring) {
		got[a.Rule] += a.Group + ";"
	}
	want := map[string]string{
		"hourly_export_silent": "export_hourly;",
		"export_silent":        "export_hourly;",
		"export_unhealthy":     "export_flaky;", // not export_hourly: no run, no rate
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("firing %v\nwant   %v", got, want)
	}
	// The export runs again: the alerts resolve.
	finish(agg, "", "export_hourly", "h2", apollo.StatusSuccess, clock.Now().UnixMilli(), 5000)
	f.eval(10 * time.Second)
	for _, a := range f.eng.Alerts("", apollo.AlertResolved) {
		if a.Group != "export_hourly" {
			t.Errorf("resolved %s/%s", a.Rule, a.Group)
		}
	}
	if n := len(f.eng.Alerts("", apollo.AlertResolved)); n != 2 {
		t.Fatalf("%d resolved, want 2", n)
	}
}

// pct_change compares a window with the one of the same length just
// before it: reports that take 2.5 times as long fire, steady ones and
// ones with no previous window do not.
func TestPctChangeSlowdown(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	agg := newAggregator(t, clock)
	now := t0.UnixMilli()
	for i := range 4 {
		ts := int64(i) * 60_000
		finish(agg, "", "report_sales", fmt.Sprint("p", i), apollo.StatusSuccess, now-45*60_000+ts, 20_000)
		finish(agg, "", "report_sales", fmt.Sprint("c", i), apollo.StatusSuccess, now-15*60_000+ts, 50_000)
		finish(agg, "", "report_hr", fmt.Sprint("hp", i), apollo.StatusSuccess, now-45*60_000+ts, 40_000)
		finish(agg, "", "report_hr", fmt.Sprint("hc", i), apollo.StatusSuccess, now-15*60_000+ts, 41_000)
		finish(agg, "", "report_new", fmt.Sprint("n", i), apollo.StatusSuccess, now-15*60_000+ts, 90_000)
	}
	f := newFixture(t, `RULE reports_slower task_prefix: "report_" BY: name WINDOW: 30m
  THRESHOLD: pct_change(avg_cost) > 100% and avg_cost > 30s NOTIFY: slack`, agg, nil)
	f.clock = clock
	f.eval(0)
	ns := f.expectSent(firing)
	a := ns[0].Alert
	if a.Group != "report_sales" || a.Value != 1.5 {
		t.Fatalf("fired %+v", a)
	}
	if want := "pct_change(avg_cost) +150% > 100% and avg_cost > 30s for report_sales over 30m"; a.Summary != want {
		t.Errorf("summary %q\nwant      %q", a.Summary, want)
	}
	// The prefix as a whole: (20+40)/2 = 30s before, (50+41+90)/3 = 60.3s now.
	f.eng.SetRules("", parse(t, `RULE all_reports task_prefix: "report_" WINDOW: 30m THRESHOLD: pct_change(avg_cost) > 100% NOTIFY: slack`))
	f.eval(10 * time.Second)
	ns = f.expectSent(firing, resolved) // the new rule is evaluated, then the old one's alert resolves
	if a := ns[0].Alert; a.Group != "report_" || !strings.HasPrefix(a.Summary, "pct_change(avg_cost) +101% > 100% for report_* over 30m") {
		t.Fatalf("prefix alert %+v", a)
	}
}

// "missed" counts the runs that were due and did not start: a rule on it
// fires for the job with one, per job with BY: name.
func TestMissedMetric(t *testing.T) {
	t.Parallel()
	tbl := newTable()
	tbl.set("cron.backup", apollo.Summary{Missed: 1, Late: 1})
	tbl.set("cron.report", apollo.Summary{Count: 3, Success: 3, Started: 3})
	f := newFixture(t, `RULE cron_missed task_prefix: "cron." BY: name WINDOW: 1h THRESHOLD: missed > 0 NOTIFY: email`, tbl, nil)
	f.eval(0)
	a := f.only("", apollo.AlertFiring)
	if a.Group != "cron.backup" || a.Value != 1 {
		t.Errorf("firing %s with %v, want cron.backup with 1", a.Group, a.Value)
	}
}

// The engine keeps where each prefix's jobs are from one cycle to the
// next; a job that comes moves them, and every rule must read its own
// jobs' rows after that: a new job sorted before the prefix's, then one
// inside it. Two tenants whose jobs change differently keep their own.
func TestPrefixRangesFollowNewJobs(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	agg := newAggregator(t, clock)
	const src = `
RULE b_failing task_prefix: "b_" WINDOW: 10m THRESHOLD: failed > 0 NOTIFY: email
RULE b_each task_prefix: "b_" BY: name WINDOW: 10m THRESHOLD: failed > 0 NOTIFY: email
`
	f := newFixture(t, src, agg, nil)
	f.clock = clock
	f.eng.SetRules("acme", parse(t, src))
	run := 0
	job := func(tenant, name string, st apollo.Status, times int) {
		for range times {
			run++
			finish(agg, tenant, name, fmt.Sprint(name, "#", run), st, clock.Now().UnixMilli()-1000, 500)
		}
	}
	for _, step := range []struct {
		name string
		runs func()
		want map[string]string // tenant -> its firing alerts, rule/group=value
	}{
		{"one job", func() {
			job("", "b_load", apollo.StatusFailed, 1)
			job("acme", "b_load", apollo.StatusFailed, 1)
		}, map[string]string{"": "b_each/b_load=1 b_failing/b_=1", "acme": "b_each/b_load=1 b_failing/b_=1"}},
		// The default tenant gets a job sorted before b_, acme one after it.
		{"a job before the prefix", func() {
			job("", "a_new", apollo.StatusSuccess, 3)
			job("acme", "c_new", apollo.StatusSuccess, 3)
			job("", "b_load", apollo.StatusFailed, 1)
			job("acme", "b_load", apollo.StatusFailed, 1)
		}, map[string]string{"": "b_each/b_load=2 b_failing/b_=2", "acme": "b_each/b_load=2 b_failing/b_=2"}},
		{"a job inside the prefix, in one tenant", func() {
			job("", "b_extract", apollo.StatusFailed, 1)
		}, map[string]string{"": "b_each/b_extract=1 b_each/b_load=2 b_failing/b_=3", "acme": "b_each/b_load=2 b_failing/b_=2"}},
	} {
		step.runs()
		f.eval(10 * time.Second)
		for tenant, want := range step.want {
			var got []string
			for _, a := range f.eng.Alerts(tenant, apollo.AlertFiring) {
				got = append(got, fmt.Sprintf("%s/%s=%v", a.Rule, a.Group, a.Value))
			}
			slices.Sort(got)
			if s := strings.Join(got, " "); s != want {
				t.Errorf("%s: tenant %q fires %q, want %q", step.name, tenant, s, want)
			}
		}
	}
}
