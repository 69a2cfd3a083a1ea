package main

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/notify/webhook"
)

// late_rate is late runs over the runs that were due, each run counted
// once (docs/rules.md): a run the bus marks missed that then starts is one
// due run, not one missed and one started. Before, it counted in both, so
// acme's 7 due runs, 4 of them missed and one of those started, read 4/8
// and the rule below (late_rate > 55%) never fired; globex's 6 due runs, 3
// missed and one of those started, read 3/7 and now read 3/6, still under
// it. Both tenants in every mode, and the same figures after kill -9.
func TestLateRateCountsEachRunOnce(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		// started >= 4 holds once a missed run has started: only then do
		// the old and the right late_rate differ.
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(
				"RULE %[1]s_late task_prefix: \"lr_\" WINDOW: 15m THRESHOLD: late_rate > 55%% and started >= 4 NOTIFY: hook\n"+
					"RULE %[1]s_started task_prefix: \"lr_\" WINDOW: 15m THRESHOLD: started >= 4 NOTIFY: hook\n", tenant), nil, 200)
		}
		now := time.Now().UnixMilli()
		// Due six minutes ago, past the default missed_after (5m): the
		// bus marks a pending one missed at once.
		due := now - 6*time.Minute.Milliseconds()
		missed := map[string]int{"acme": 4, "globex": 3}
		for _, tenant := range tenants {
			for i := range 3 {
				d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(
					`[{"taskID":"ontime-%d","name":"lr_job","sequence":1,"status":"running","ts":%d,"scheduledAt":%d}]`, i, now, now), nil, 200)
			}
			for i := range missed[tenant] {
				d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(
					`[{"taskID":"miss-%d","name":"lr_job","sequence":1,"status":"pending","ts":%d,"scheduledAt":%d}]`, i, now, due), nil, 200)
			}
		}
		row := func(tenant string) apiclient.JobRow {
			var page apiclient.MetricsPage
			d.do(tenant, "GET", "/api/v1/metrics?window=15m&prefix=lr_", "", &page, 200)
			return page.Total
		}
		for _, tenant := range tenants {
			eventually(t, 30*time.Second, tenant+"'s missed runs", func() bool { return row(tenant).Missed == int64(missed[tenant]) })
			d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(
				`[{"taskID":"miss-0","name":"lr_job","sequence":2,"status":"running","ts":%d}]`, time.Now().UnixMilli()), nil, 200)
		}
		want := map[string]struct{ due, late int64 }{"acme": {7, 4}, "globex": {6, 3}}
		figures := map[string]apiclient.JobRow{}
		for _, tenant := range tenants {
			eventually(t, 30*time.Second, tenant+"'s late start", func() bool { return row(tenant).Started == 4 })
			r := row(tenant)
			w := want[tenant]
			if r.Due != w.due || r.Late != w.late || r.Missed != int64(missed[tenant]) ||
				math.Abs(r.LateRate-float64(w.late)/float64(w.due)) > 1e-9 {
				t.Errorf("tenant %s: started %d, missed %d, late %d, due %d, lateRate %v; want due %d, late %d, lateRate %d/%d",
					tenant, r.Started, r.Missed, r.Late, r.Due, r.LateRate, w.due, w.late, w.late, w.due)
			}
			figures[tenant] = r
		}
		// acme's late rule fires; globex's does not, by the evaluation
		// that fired its started rule (which holds from the same start).
		awaitFiring(t, h, []string{"acme_late", "acme_started", "globex_started"}, "globex_late")

		d.crash()
		for _, tenant := range tenants {
			var r apiclient.JobRow
			eventually(t, 30*time.Second, tenant+"'s figures after kill -9", func() bool {
				r = row(tenant)
				return r == figures[tenant]
			})
			var alerts struct {
				Alerts []struct{ Rule, State string }
			}
			firing := map[string]bool{}
			// The started rule fires with the same figures: once it shows,
			// the late rule has been judged on them too.
			eventually(t, 30*time.Second, tenant+"'s alerts after kill -9", func() bool {
				d.do(tenant, "GET", "/api/v1/alerts", "", &alerts, 200)
				clear(firing)
				for _, a := range alerts.Alerts {
					firing[a.Rule] = a.State == "firing"
				}
				return firing[tenant+"_started"]
			})
			if firing[tenant+"_late"] != (tenant == "acme") {
				t.Errorf("tenant %s after kill -9: alerts %+v", tenant, alerts.Alerts)
			}
		}
	})
}

// awaitFiring waits for a firing notification of each rule of want
// (named uniquely across tenants) and fails on one of never.
func awaitFiring(t *testing.T, h *hook, want []string, never string) {
	t.Helper()
	got := map[string]bool{}
	for len(got) < len(want) {
		p := h.await(t, 30*time.Second, fmt.Sprintf("firing of %v", want), func(webhook.ApolloPayload) bool { return true })
		for _, n := range notes(p) { // a digest holds several
			if n.Alert.Rule == never {
				t.Fatalf("%s fired: %s", never, n.Alert.Summary)
			}
			if n.Kind == apollo.NotifyFiring {
				got[n.Alert.Rule] = true
			}
		}
	}
}
