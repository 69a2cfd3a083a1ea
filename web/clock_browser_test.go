package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/httpapi"
)

// skewClock sets the clock of every page the browser opens from now on
// off the real time by skew, as a laptop whose clock is wrong.
func (b *browser) skewClock(skew time.Duration) {
	b.t.Helper()
	script := fmt.Sprintf(`(() => {
  const Real = Date, skew = %d;
  class Skewed extends Real {
    constructor(...a) { if (a.length === 0) super(Real.now() + skew); else super(...a); }
    static now() { return Real.now() + skew; }
  }
  globalThis.Date = Skewed;
})();`, skew.Milliseconds())
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
		b.t.Fatal(err)
	}
}

// A silence made in a browser whose clock is wrong holds from when it is
// made, by the server's clock, for as long as chosen: the page used to
// send its own clock's startsAt and endsAt, so from a laptop two hours
// ahead the silence began two hours later and the alert it was made for
// went on notifying; from one two hours behind, it was refused as already
// over. The other tenant sees nothing of it.
func TestSilenceFromABrowserWithAWrongClockInBrowser(t *testing.T) {
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		t.Run(fmt.Sprintf("skew=%s", skew), func(t *testing.T) {
			auth := tokens{
				"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
				"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
			}
			d := newDashboard(t, auth)
			b := newBrowser(t)
			b.skewClock(skew)
			d.reportAs("admin-token", run("etl", "etl-1", "failed", time.Now(), time.Second)...)
			d.reportAs("b-token", run("etl", "etl-b", "failed", time.Now(), time.Second)...)
			b.signIn(d.srv.URL+"/alerts", "admin-token")
			b.until("the browser's clock is off", fmt.Sprintf(`Math.abs(Date.now() - %d - %d) < 60000`, time.Now().UnixMilli(), skew.Milliseconds()))
			b.until("the alert", `!!document.querySelector("tr[data-alert] button.history")`)
			b.do("silence it", chromedp.Click(chromedp.CSS(`tr[data-alert] .actions button:not(.ack):not(.history)`)))
			b.until("the silence form", `!!document.querySelector('form[aria-label="Silence"]')`)
			before := time.Now()
			b.do("for 1 hour", chromedp.SendKeys(chromedp.CSS(`form[aria-label="Silence"] input[name=comment]`), "deploying"),
				chromedp.Click(chromedp.CSS(`form[aria-label="Silence"] button[type=submit]`)))
			b.until("the silence listed", text("#silences")+`.includes("deploying")`)
			after := time.Now()
			b.screenshot("silenced")

			sils := d.alerts.Silences("")
			if len(sils) != 1 {
				t.Fatalf("silences of the default tenant: %+v", sils)
			}
			s := sils[0]
			if !s.Active(after) {
				t.Errorf("the silence is not active now (%s): from %s to %s", after.Format(time.RFC3339), s.StartsAt.Format(time.RFC3339), s.EndsAt.Format(time.RFC3339))
			}
			if s.EndsAt.Before(before.Add(time.Hour)) || s.EndsAt.After(after.Add(time.Hour)) {
				t.Errorf("the silence ends at %s, want an hour after it was made (%s to %s)", s.EndsAt.Format(time.RFC3339),
					before.Add(time.Hour).Format(time.RFC3339), after.Add(time.Hour).Format(time.RFC3339))
			}
			var firing *apollo.Alert
			for _, a := range d.alerts.Alerts("", apollo.AlertFiring) {
				if a.Rule == "etl_failures" {
					firing = &a
				}
			}
			if firing == nil || !s.Matches(firing) {
				t.Errorf("the silence does not match the alert it was made for: %+v", firing)
			} else if s.Group != firing.Group || s.Prefix != "" {
				// A prefix would also hold the alerts of longer-named jobs.
				t.Errorf("the silence holds group %q, prefix %q; want the alert's group %q exactly", s.Group, s.Prefix, firing.Group)
			}
			if other := d.alerts.Silences("b"); len(other) != 0 {
				t.Errorf("tenant b has silences: %+v", other)
			}
		})
	}
}

// The times the server sends are measured against the server's clock,
// not the browser's: from a browser two hours ahead or behind, an alert
// that has just fired fired seconds ago (it read "2h ago", on the Alerts
// page and the Overview), and the task just reported was updated in the
// last 15 minutes (the Tasks filter hid it).
func TestTimesAgainstTheServersClockInBrowser(t *testing.T) {
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		t.Run(fmt.Sprintf("skew=%s", skew), func(t *testing.T) {
			d := newDashboard(t, testTokens)
			b := newBrowser(t)
			b.skewClock(skew)
			d.reportAs("admin-token", run("etl", "etl-1", "failed", time.Now(), time.Second)...)
			b.signIn(d.srv.URL+"/alerts", "admin-token")
			b.until("the browser's clock is off", fmt.Sprintf(`Math.abs(Date.now() - %d - %d) < 60000`, time.Now().UnixMilli(), skew.Milliseconds()))
			secondsAgo := func(sel string) string {
				return fmt.Sprintf(`/^\d+s ago$/.test(document.querySelector(%q)?.textContent ?? "")`, sel)
			}
			b.until("the alert fired seconds ago", secondsAgo(`tr[data-alert] td[data-label="Since"]`))
			b.goTo("/overview")
			b.until("on the overview too", secondsAgo(`#firing td[data-label="Since"]`))
			b.do("tasks of the last 15 minutes", chromedp.Navigate(d.srv.URL+"/tasks?since=900000"))
			b.until("the task just reported", `!!document.querySelector('tr[data-task="etl-1"]')`)
			b.screenshot("tasks")
		})
	}
}
