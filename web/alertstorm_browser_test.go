package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// An alert storm (a BY: name rule over 1 500 failing jobs of acme and
// 400 of globex, firing at once) overflows the stream: the engine drops
// its subscription, or a page's queue fills with alert changes, and the
// stream says alerts_lost instead of the changes. Both tenants' Alerts
// pages, open through the storm, then show every alert the server holds,
// read again on alerts_lost: acme's 1 500, globex's 400 and none of
// acme's. Nothing else reads them again here: the pages stay connected
// and do not poll. Without the read they showed the few hundred changes
// the stream delivered before the loss.
func TestAlertsReadAgainAfterAStormInBrowser(t *testing.T) {
	auth := tokens{
		"acme-token":   {Name: "alice", Tenant: "acme", Role: httpapi.RoleAdmin},
		"globex-token": {Name: "bob", Tenant: "globex", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	want := map[string]int{"acme": 1500, "globex": 400}
	pages := map[string]*browser{}
	for tenant := range want {
		d.putRules(tenant+"-token", fmt.Sprintf("RULE %s_storm task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 BY: name\n", tenant, tenant+"_"))
		b := newBrowser(t)
		b.signIn(d.srv.URL+"/alerts", tenant+"-token")
		b.until(tenant+"'s page with no alerts", text("#tab-firing")+`.includes("(0)")`)
		pages[tenant] = b
	}
	start := d.hub.Stats()

	now := time.Now()
	for tenant, n := range want {
		var evs []string
		for i := range n {
			evs = append(evs, run(fmt.Sprintf("%s_%05d", tenant, i), fmt.Sprintf("%s_%05d-1", tenant, i), "failed", now, time.Second)...)
		}
		d.reportAs(tenant+"-token", evs...)
	}
	for tenant, n := range want {
		poll(t, fmt.Sprintf("%s's %d alerts firing", tenant, n), func() bool { return len(d.alerts.Alerts(tenant, apollo.AlertFiring)) == n })
	}
	// The engine dropped the stream, or a page's queue overflowed: the
	// pages are told alerts_lost. (The hub hears of the drop after the
	// engine lists the alerts.)
	poll(t, "the stream losing alert changes in the storm", func() bool {
		s := d.hub.Stats()
		return s.AlertsLost+s.AlertsCut > start.AlertsLost+start.AlertsCut
	})

	for tenant, n := range want {
		b := pages[tenant]
		b.untilIn(fmt.Sprintf("%s's %d alerts", tenant, n), text("#tab-firing")+fmt.Sprintf(`.includes("(%d)")`, n)+
			` && document.querySelectorAll("tr[data-alert]").length === 200`, time.Minute)
		b.screenshot(tenant)
		if got := b.eval(text("main")); strings.Contains(got, "acme") != (tenant == "acme") {
			t.Errorf("%s's page shows another tenant's alerts:\n%.600s", tenant, got)
		}
	}
	// Read again on alerts_lost, not on a reconnect (which reads them too).
	if s := d.hub.Stats(); s.Accepted != start.Accepted || s.ClosedSlow != start.ClosedSlow {
		t.Errorf("the pages' streams were closed and opened again in the storm (%d closed as too slow, %d accepted, %d before)",
			s.ClosedSlow-start.ClosedSlow, s.Accepted, start.Accepted)
	}
}

// poll waits for cond, checked every 20 ms, for testwait.Timeout at most.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait := testwait.Timeout(t)
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s went by", what, wait)
		}
		select { // polling the server's state with a deadline
		case <-t.Context().Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
