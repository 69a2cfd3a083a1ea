package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// The silences listed say all they match: the rule, the group, the
// prefix and the labels. The list showed the rule and the prefix only, so
// a silence made on the page for one alert (its rule and group exactly)
// read as one of the whole rule, and one of labels only as "any, any":
// every alert of the tenant. The other tenant's silences are not listed.
func TestSilencesSayWhatTheyMatchInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	d.reportAs("admin-token", run("etl_sales", "etl-1", "failed", time.Now(), time.Second)...)
	d.post("admin-token", "/api/v1/silences", `{"labels":{"env":"staging"},"duration":"1h","comment":"load test"}`)
	d.post("b-token", "/api/v1/silences", `{"rule":"etl_failures","group":"b-only-group","duration":"1h","comment":"b's silence"}`)

	b := newBrowser(t)
	b.signIn(d.srv.URL+"/alerts", "admin-token")
	b.until("the alert", `!!document.querySelector("tr[data-alert] button.history")`)
	b.do("silence it", chromedp.Click(chromedp.CSS(`tr[data-alert] .actions button:not(.ack):not(.history)`)))
	b.until("the silence form", `!!document.querySelector('form[aria-label="Silence"]')`)
	b.do("for 1 hour", chromedp.SendKeys(chromedp.CSS(`form[aria-label="Silence"] input[name=comment]`), "rerun"),
		chromedp.Click(chromedp.CSS(`form[aria-label="Silence"] button[type=submit]`)))
	b.until("the silence listed", text("#silences")+`.includes("rerun")`)
	b.screenshot("silences")

	row := func(comment string) string {
		return `([...document.querySelectorAll("#silences tbody tr")].find((r) => r.innerText.includes(` + jsString(comment) + `))?.innerText ?? "")`
	}
	cell := func(comment, label string) string {
		return `([...document.querySelectorAll("#silences tbody tr")].find((r) => r.innerText.includes(` + jsString(comment) + `))` +
			`?.querySelector('td[data-label=` + jsString(label) + `]')?.textContent ?? "")`
	}
	b.until("the page's silence names the alert's group", cell("rerun", "Group")+` === "etl"`)
	b.until("the labels' silence names its label, not any alert", cell("load test", "Labels")+` === "env=staging"`)
	b.until("the other tenant's silence not listed", `document.querySelectorAll("#silences tbody tr").length === 2 && `+
		row("b's silence")+` === "" && !`+text("#silences")+`.includes("b-only-group")`)
}
