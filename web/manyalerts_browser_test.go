package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// manyAlerts fires n alerts of the default tenant: one event rule per
// job prefix, and a failed run of each job.
func (d *dashboard) manyAlerts(n int) {
	d.t.Helper()
	var rules strings.Builder
	for i := range n {
		fmt.Fprintf(&rules, "RULE r%05d task_prefix: \"j%05d\" ON: failed NOTIFY: console\n", i, i)
	}
	d.putRules("admin-token", rules.String())
	now := time.Now()
	for from := 0; from < n; from += 250 {
		var evs []string
		for i := from; i < min(from+250, n); i++ {
			evs = append(evs, run(fmt.Sprintf("j%05d", i), fmt.Sprintf("j%05d-1", i), "failed", now.Add(time.Duration(i)*time.Millisecond), time.Second)...)
		}
		d.reportAs("admin-token", evs...)
	}
}

// Thousands of firing alerts (a rule with BY: name over as many failing
// jobs) are drawn a page at a time, newest first, with how many there are
// and a button for the next ones: drawn all at once, 5 000 took the page
// 15 s to open and each click (History, Ack) 6 s to answer.
func TestManyAlertsInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	const n = 1000
	d.manyAlerts(n)
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/", "admin-token")
	b.goTo("/alerts")
	b.until("the firing tab counts them all", text("#tab-firing")+`.includes("(1000)")`)
	b.until("a page of them, and how many there are", `document.querySelectorAll("tr[data-alert]").length === 200 && `+
		text(".more-alerts")+`.includes("The newest 200 of 1,000 alerts")`)
	b.do("show more", chromedp.Click(chromedp.CSS(".more-alerts button")))
	b.until("the next page", `document.querySelectorAll("tr[data-alert]").length === 400`)
	b.do("by rule", chromedp.Click(chromedp.CSS("#tab-rules")))
	b.until("a page of rules", `document.querySelectorAll("#by-rule section").length === 200 && `+text(".more-alerts")+`.includes("200 of 1,000 rules")`)
	b.screenshot("by-rule")
	// The overview, drawn again at every batch of the stream's runs, has
	// the newest 50 and says where the rest are.
	b.goTo("/overview")
	b.until("the newest 50 firing alerts, and how many there are", `document.querySelectorAll("#firing tbody tr").length === 50 && `+
		text(".more-firing")+`.includes("The newest 50 of 1,000 firing alerts")`)
}

// The server lists at most 10 000 alerts, firing first, and says how many
// there are. Tenant acme has 10 050 firing and globex 2: acme's Alerts
// page says the server has 10 050 and lists the first 10 000; globex's
// says nothing of the kind. Before, the page counted what it held and
// showed "firing (10000)" as if that were all.
func TestAlertsPastTheServersListInBrowser(t *testing.T) {
	auth := tokens{
		"acme-token":   {Name: "alice", Tenant: "acme", Role: httpapi.RoleAdmin},
		"globex-token": {Name: "bob", Tenant: "globex", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	want := map[string]int{"acme": 10_050, "globex": 2}
	now := time.Now()
	for tenant, n := range want {
		d.putRules(tenant+"-token", "RULE each task_prefix: \"j\" WINDOW: 1h THRESHOLD: failed >= 1 BY: name\n")
		for from := 0; from < n; from += 2500 {
			var evs []string
			for i := from; i < min(from+2500, n); i++ {
				evs = append(evs, run(fmt.Sprintf("j%05d", i), fmt.Sprintf("j%05d-1", i), "failed", now, time.Second)...)
			}
			d.reportAs(tenant+"-token", evs...)
		}
	}
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/alerts", "acme-token")
	b.untilIn("acme's page saying how many the server has", text("#alerts-cut")+`.includes("10,050")`, time.Minute)
	b.screenshot("alerts-cut")
	b.goTo("/overview")
	b.until("the overview saying the server has more", text(".more-firing")+`.includes("The newest 50 of 10,000 firing alerts listed, of the 10,050 alerts the server has")`)

	b = newBrowser(t)
	b.signIn(d.srv.URL+"/alerts", "globex-token")
	b.until("globex's 2 alerts", text("#tab-firing")+`.includes("(2)")`)
	if got, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!!document.querySelector("#alerts-cut")`)); err != nil || got {
		t.Errorf("globex's page, with all of its 2 alerts listed, says some are not (%v)", err)
	}
}
