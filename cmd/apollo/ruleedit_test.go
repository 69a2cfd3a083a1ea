package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/notify/webhook"
)

// An event rule edited under its name while its storm goes on takes the
// storm along, as a rate rule takes its alert: the follow-up at the end of
// the group window carries the rule's severity and labels as they are now.
// Before, the open group kept what the rule said when the storm began, so
// raising a rule to critical (or moving it to other channels) changed
// nothing for as long as the storm lasted. globex's rule, not edited,
// keeps its follow-up as it was.
func TestEditedEventRuleTakesItsStormAlong(t *testing.T) {
	const window = "15s"
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		rule := func(tenant, extra string) string {
			return fmt.Sprintf("RULE %[1]s_failed task_prefix: \"%[1]s_\" ON: failed GROUP_WINDOW: %s%s NOTIFY: hook\n", tenant, window, extra)
		}
		want := map[string]string{}
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", rule(tenant, ""), nil, 200)
			want[tenant] = tenant + "_failed"
		}
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_load")
		}
		awaitTenants(t, h, "firing", want)
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_load") // folded into the storm's follow-up
		}
		d.do("acme", "PUT", "/api/v1/rules", rule("acme", " SEVERITY: critical LABELS: team=payments"), nil, 200)

		got := map[string]webhook.ApolloPayload{}
		for len(got) < len(tenants) {
			p := h.await(t, time.Minute, "the storms' follow-ups", func(p webhook.ApolloPayload) bool { return !strings.HasPrefix(p.Alert.Rule, "apollo:") })
			if want[p.Alert.Tenant] != p.Alert.Rule || p.Kind != "storm" {
				t.Fatalf("a %s notification of tenant %q, rule %q: want one follow-up of each tenant's storm\n%+v", p.Kind, p.Alert.Tenant, p.Alert.Rule, p)
			}
			got[p.Alert.Tenant] = p
		}
		if a := got["acme"].Alert; a.Severity != "critical" || a.Labels["team"] != "payments" || a.Count != 1 {
			t.Errorf("acme's follow-up after the edit: severity %q, labels %v, count %d; want critical, team=payments, 1", a.Severity, a.Labels, a.Count)
		}
		if a := got["globex"].Alert; a.Severity != "warning" || len(a.Labels) != 0 || a.Count != 1 {
			t.Errorf("globex's follow-up: severity %q, labels %v, count %d; want warning, no labels, 1", a.Severity, a.Labels, a.Count)
		}
	})
}

// An ack of an alert that has resolved is refused (409), in every mode,
// also when its rule and group fire again as a new alert: the new alert,
// which nobody has seen, stays unacknowledged and keeps its repeats. And
// another tenant cannot ack it by its ID (404). Before, the three
// processes acked whichever episode of the same rule and group was open,
// and answered 200 for the one the user named.
func TestAckOfAResolvedAlertIsRefused(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %[1]s_failed task_prefix: \"%[1]s_\" ON: failed GROUP_WINDOW: 1s NOTIFY: hook\n", tenant), nil, 200)
		}
		d.fail("acme", "acme_load")
		old := d.firingAlert("acme", "acme_failed")
		eventually(t, 30*time.Second, "acme's first alert resolved", func() bool {
			var l struct{ Alerts []shownAlert }
			d.do("acme", "GET", "/api/v1/alerts?state=resolved", "", &l, 200)
			return slices.ContainsFunc(l.Alerts, func(a shownAlert) bool { return a.ID == old.ID })
		})
		d.fail("acme", "acme_load")
		cur := d.firingAlert("acme", "acme_failed")
		if cur.ID == old.ID {
			t.Fatalf("the second failure after the group resolved is shown as the same alert %s", cur.ID)
		}
		d.do("globex", "POST", "/api/v1/alerts/"+cur.ID+"/ack", "", nil, 404)
		d.do("acme", "POST", "/api/v1/alerts/"+old.ID+"/ack", "", nil, 409)
		var l struct{ Alerts []shownAlert }
		d.do("acme", "GET", "/api/v1/alerts", "", &l, 200)
		for _, a := range l.Alerts {
			if a.AckedBy != "" {
				t.Errorf("alert %s (the resolved one %s, the open one %s) is shown acknowledged by %s", a.ID, old.ID, cur.ID, a.AckedBy)
			}
		}
	})
}
