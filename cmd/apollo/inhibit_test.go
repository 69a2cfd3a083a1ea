package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
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
		want := map[string]string{}
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_missed task_prefix: %q ON: missed NOTIFY: hook\n", tenant, tenant+"_"), nil, 200)
			d.putExpectations(tenant, fmt.Sprintf("expectations:\n  - job: %s_cron\n    every: 1s\n    grace: 1s\n", tenant))
			want[tenant] = tenant + "_missed"
		}
		awaitTenants(t, h, "firing", want)
	})
}
