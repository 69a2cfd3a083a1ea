package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// The Jobs page drew a row for every job at once: with 10 000 jobs it
// took 6 s to open, and as long again at each poll and each key typed in
// the filter (5 s for one prefix). It now draws 200, says how many there
// are, and Show more adds the next 200. The other tenant's jobs never
// show.
func TestManyJobsInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	const n = 10_000
	start := time.Now().Add(-time.Minute)
	var evs []string
	for i := range n {
		st := "success"
		if i%10 == 0 {
			st = "failed"
		}
		evs = append(evs, run(fmt.Sprintf("job-%05d", i), fmt.Sprintf("job-%05d-1", i), st, start, time.Second)...)
		if len(evs) >= 4000 || i == n-1 {
			d.reportAs("admin-token", evs...)
			evs = evs[:0]
		}
	}
	d.reportAs("b-token", run("job-00000b", "job-00000b-1", "failed", start, time.Second)...)
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/", "admin-token")
	b.goTo("/jobs")
	rows := `document.querySelectorAll("#jobs-table tbody tr")`
	b.until("200 jobs, and how many there are", rows+`.length === 200 && `+text(".more-jobs")+`.includes("The first 200 of 10,000 jobs")`)
	b.screenshot("first")
	b.do("show more", chromedp.Click(chromedp.CSS(".more-jobs button")))
	b.until("the next 200", rows+`.length === 400`)
	b.do("filter", chromedp.SendKeys(chromedp.CSS("main input[data-filter]"), "job-0000"))
	b.until("the 10 jobs of the prefix, all of them, none of the other tenant's", rows+`.length === 10 && !document.querySelector(".more-jobs") && `+
		`!document.querySelector('tr[data-job="job-00000b"]')`)
	b.screenshot("filtered")
}
