package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The dashboards silence one alert: its rule and its group exactly. They
// sent the group as a prefix, so silencing the alert of job etl_sales of
// a BY: name rule silenced etl_sales_eu's as well, and every later job
// whose name starts the same: alerts nobody meant to hide went untold.
// A silence now has "group", matched exactly; it holds after kill -9 and
// leaves the longer-named job's alert told. Two tenants, both modes.
func TestSilenceOfOneGroupLeavesTheOthers(t *testing.T) {
	// No repeats: the first alert fires a little before it is silenced.
	eachMode(t, deployOptions{repeat: "1h"}, func(t *testing.T, d *deployment, h *hook) {
		want := map[string]string{}
		for _, tenant := range tenants {
			rule := tenant + "_jobs"
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 BY: name NOTIFY: hook\n",
				rule, tenant+"_etl"), nil, 200)
			d.fail(tenant, tenant+"_etl_sales")
			want[tenant] = rule
		}
		awaitTenants(t, h, "firing", want)
		ids := map[string]string{}
		for _, tenant := range tenants {
			a := d.firingAlert(tenant, tenant+"_jobs")
			if a.Group != tenant+"_etl_sales" {
				t.Fatalf("tenant %s: the alert's group %q", tenant, a.Group)
			}
			ids[tenant] = d.silence(tenant, fmt.Sprintf(`"rule":%q,"group":%q`, a.Rule, a.Group))
		}
		d.crash()
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_etl_sales_eu")
		}
		// The longer-named job's alert is told; had the silence taken it
		// in, nothing would come and the wait would fail.
		awaitTenants(t, h, "firing", want)
		for _, tenant := range tenants {
			// The three processes' bus shows the alerts the leader saved,
			// which may be a moment after it told them.
			seen := map[string][]string{}
			eventually(t, 30*time.Second, tenant+"'s two alerts shown", func() bool {
				var al struct{ Alerts []shownAlert }
				d.do(tenant, "GET", "/api/v1/alerts?state=firing", "", &al, 200)
				clear(seen)
				for _, a := range al.Alerts {
					seen[a.Group] = a.SilencedBy
				}
				return len(seen) == 2
			})
			if s, ok := seen[tenant+"_etl_sales"]; !ok || !slices.Equal(s, []string{ids[tenant]}) {
				t.Errorf("tenant %s: %s_etl_sales's alert silenced by %v, want %s (alerts %v)", tenant, tenant, s, ids[tenant], seen)
			}
			if s, ok := seen[tenant+"_etl_sales_eu"]; !ok || len(s) != 0 {
				t.Errorf("tenant %s: %s_etl_sales_eu's alert silenced by %v, want by none (alerts %v)", tenant, tenant, s, seen)
			}
		}
	})
}
