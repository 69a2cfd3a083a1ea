package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/rules"
	"github.com/redis/go-redis/v9"
)

// INHIBIT rules written through PUT /api/v1/rules act, after kill -9 too,
// per tenant: acme's rules hold its report alert while its warehouse
// alert fires (shown marked, not notified); globex has the same rules
// without the INHIBIT rule, and its report alert is told.
func TestInhibitRulesSurviveKill(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		const rulesSrc = `RULE warehouse_failed task_prefix: "%[1]s_warehouse_" ON: failed GROUP_WINDOW: 10m NOTIFY: hook
RULE reports_failed task_prefix: "%[1]s_report_" ON: failed GROUP_WINDOW: 10m NOTIFY: hook
`
		for _, tenant := range tenants {
			src := fmt.Sprintf(rulesSrc, tenant)
			if tenant == "acme" {
				src = "INHIBIT warehouse_down SOURCE: rule=warehouse_failed TARGET: rule=reports_failed\n" + src
			}
			d.do(tenant, "PUT", "/api/v1/rules", src, nil, 200)
		}
		d.crash()
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_warehouse_load")
		}
		awaitTenants(t, h, "firing", map[string]string{"acme": "warehouse_failed", "globex": "warehouse_failed"})
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_report_daily")
		}
		// Fails on a notification of acme's report alert.
		awaitTenants(t, h, "firing", map[string]string{"globex": "reports_failed"})
		if a := d.firingAlert("acme", "reports_failed"); !slices.Equal(a.InhibitedBy, []string{"warehouse_failed"}) {
			t.Fatalf("acme's report alert after kill -9: %+v, want inhibited by warehouse_failed", a)
		}
		if a := d.firingAlert("globex", "reports_failed"); len(a.InhibitedBy) != 0 {
			t.Fatalf("globex's report alert: %+v, want not inhibited (acme's INHIBIT rule is acme's)", a)
		}
	})
}

// putExpectations sets tenant's expectations through the API.
func (d *deployment) putExpectations(tenant, src string) {
	d.t.Helper()
	req, err := http.NewRequest("PUT", "http://"+d.api.addr+"/api/v1/expectations", strings.NewReader(src))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.tokens[tenant])
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		d.t.Fatalf("PUT /api/v1/expectations as %s: status %d: %s", tenant, resp.StatusCode, b)
	}
}

// ON: missed fires in every mode, per tenant: in the three-process mode
// the bus records the missed run and the alert process hears of it
// through the change feed (before, only the all-in-one server fired it).
func TestMissedFiresInEveryMode(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		awaitTenants(t, h, "firing", d.watch("missed", "expectations:\n  - job: %s_cron\n    every: 1s\n    grace: 1s\n"))
	})
}

// ON: too_short fires in every mode, per tenant, and the run shows the
// mark in its history: in the three-process mode the bus marks the run
// and the alert process hears of the mark through the change feed
// (before, only the all-in-one server fired it, and no run showed it).
func TestTooShortFiresInEveryMode(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		want := d.watch("too_short", "expectations:\n  - job: %s_quick\n    min_runtime: 1h\n")
		for _, tenant := range tenants {
			d.succeed(tenant, tenant+"_quick", "quick-"+tenant)
		}
		awaitTenants(t, h, "firing", want)
		for _, tenant := range tenants {
			var task apollo.Task
			d.do(tenant, "GET", "/api/v1/tasks/quick-"+tenant, "", &task, 200)
			last := task.History[len(task.History)-1]
			if task.Status != apollo.StatusSuccess || last.Kind != apollo.KindTooShort || !strings.Contains(last.Reason, "1h") {
				t.Fatalf("tenant %s: the run is %s with last record %+v, want success marked too_short", tenant, task.Status, last)
			}
		}
	})
}

// The alert processes make each mark on the feed the occurrence it
// stands for, and hand every change on to the engine.
func TestMarksFromFeed(t *testing.T) {
	t.Parallel()
	var got []alert.Occurrence
	applied := 0
	f := marksFromFeed(func(_ uint64, o alert.Occurrence) { got = append(got, o) }, func(*apollo.Change) { applied++ })
	slot := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for _, c := range []apollo.Change{
		{Task: apollo.Task{TaskID: bus.MissedRunID("cron", slot), Name: "cron", Tenant: "acme"}, Record: apollo.Record{Kind: apollo.KindMissedStart}},
		{Task: apollo.Task{TaskID: "q", Name: "quick", Tenant: "acme"}, Record: apollo.Record{Kind: apollo.KindTooShort, Reason: "ran 1s", Event: apollo.Event{Ts: 7}}},
		{Task: apollo.Task{TaskID: "o", Name: "often"}, Record: apollo.Record{Kind: apollo.KindTooOften, Reason: "3 runs", Event: apollo.Event{Ts: 8}}},
		{Task: apollo.Task{TaskID: "r", Name: "plain"}, Record: apollo.Record{Kind: apollo.KindReport}},
	} {
		f(&c)
	}
	want := []alert.Occurrence{
		{Tenant: "acme", Job: "cron", Kind: rules.OccurrenceMissed, At: slot, Detail: "no run started (expected 2026-12-01 02:00:00 UTC)"},
		{Tenant: "acme", Job: "quick", Kind: rules.OccurrenceTooShort, Run: "q", At: time.UnixMilli(7), Detail: "ran 1s"},
		{Job: "often", Kind: rules.OccurrenceTooOften, Run: "o", At: time.UnixMilli(8), Detail: "3 runs"},
	}
	if applied != 4 || len(got) != len(want) {
		t.Fatalf("applied %d, occurrences %+v", applied, got)
	}
	for i := range want {
		if got[i].Tenant != want[i].Tenant || got[i].Job != want[i].Job || got[i].Kind != want[i].Kind || got[i].Run != want[i].Run ||
			!got[i].At.Equal(want[i].At) || got[i].Detail != want[i].Detail {
			t.Errorf("occurrence %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// watch gives each tenant the rule TENANT_on, ON: on over its jobs, and
// the expectations exp (%s is the tenant); it returns the rules
// awaitTenants waits for.
func (d *deployment) watch(on, exp string) map[string]string {
	d.t.Helper()
	want := map[string]string{}
	for _, tenant := range tenants {
		want[tenant] = tenant + "_" + on
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s task_prefix: %q ON: %s NOTIFY: hook\n", want[tenant], tenant+"_", on), nil, 200)
		d.putExpectations(tenant, fmt.Sprintf(exp, tenant))
	}
	return want
}

// succeed reports a run of job that succeeded a millisecond after it
// started, ended after every run reported before it (runAt).
func (d *deployment) succeed(tenant, job, id string) {
	d.t.Helper()
	start, end := d.runAt()
	d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(
		`[{"taskID":%q,"name":%q,"sequence":1,"status":"running","ts":%d},{"taskID":%q,"sequence":2,"status":"success","ts":%d}]`,
		id, job, start, id, end), nil, 200)
}

// A job declared downstream of another (upstream) has its alerts held
// while the upstream job is down, in every mode, per tenant: marked
// "inhibited by" the cause and not notified. In the three-process mode
// the bus process works the held jobs out and the alert process reads
// them from Redis (before, it held nothing and told every echo).
func TestUpstreamHoldsInEveryMode(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_failed task_prefix: "%[1]s_etl" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
RULE %[1]s_sentinel task_prefix: "%[1]s_sentinel" ON: failed GROUP_WINDOW: 1s NOTIFY: hook
`, tenant), nil, 200)
			d.putExpectations(tenant, fmt.Sprintf("expectations:\n  - {job: %[1]s_etl_load, upstream: [%[1]s_etl_extract]}\n", tenant))
			d.fail(tenant, tenant+"_etl_extract")
		}
		awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
		if d.three { // the alert process follows what the bus process works out
			c, err := redisstore.Open(redisURL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			awaitLoadsHeld(t, c, d.prefix, "")
		}
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_etl_load")
			d.fail(tenant, tenant+"_sentinel")
		}
		// Fails on a notification of the held echo.
		awaitTenants(t, h, "firing", map[string]string{"acme": "acme_sentinel", "globex": "globex_sentinel"})
		for _, tenant := range tenants {
			// Shown once the alert process has saved its state (three
			// processes); the notifications above are already decided.
			eventually(t, 30*time.Second, tenant+"'s alert held by "+tenant+"_etl_extract", func() bool {
				var l struct{ Alerts []shownAlert }
				d.do(tenant, "GET", "/api/v1/alerts?state=firing", "", &l, 200)
				return slices.ContainsFunc(l.Alerts, func(a shownAlert) bool {
					return a.Rule == tenant+"_failed" && slices.Equal(a.InhibitedBy, []string{tenant + "_etl_extract"})
				})
			})
		}
	})
}

// A job whose runs keep switching between success and failure raises
// ON: flapping in every mode, per tenant (before, the three-process mode
// never did). The bus marks the run that made the job flap, and the
// change log carries the mark.
func TestFlappingFiresInEveryMode(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		want := d.watch("flapping", "expectations:\n  - job: %s_flappy\n    flapping: {changes: 2, window: 1h}\n")
		for _, tenant := range tenants {
			job := tenant + "_flappy"
			d.succeed(tenant, job, job+"-ok-1")
			d.fail(tenant, job)
			d.succeed(tenant, job, job+"-ok-2")
		}
		awaitTenants(t, h, "firing", want)
	})
}

// awaitLoadsHeld waits until Redis says, for each tenant, that its job
// etl_load is held by its etl_extract (the held jobs the bus process
// works out and the alert processes follow); when names the moment in the
// failure ("after kill -9, ").
func awaitLoadsHeld(t *testing.T, c redis.UniversalClient, prefix, when string) {
	t.Helper()
	var held redisstore.Holder
	stop, err := held.Watch(testCtx(t, time.Minute), c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	timeout := time.After(30 * time.Second)
	for _, tenant := range tenants {
		for { // woken by each change the holder takes
			changed := held.Changed()
			if slices.Equal(held.HeldBy(tenant, tenant+"_etl_load"), []string{tenant + "_etl_extract"}) {
				break
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("%s%s's load held by %v, want its extract", when, tenant, held.HeldBy(tenant, tenant+"_etl_load"))
			}
		}
	}
}
