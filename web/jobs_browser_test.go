package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
)

// pushedMetrics answers the stream's metric messages with one job the
// REST answer never has, so that the page shows where its rows came from;
// under a prefix, no job, as the metrics would answer.
type pushedMetrics struct{}

func (pushedMetrics) StreamSummaries(_, prefix string) (any, error) {
	page := apiclient.MetricsPage{Window: "5m0s", Prefix: prefix, Jobs: []apiclient.JobRow{}}
	if prefix == "" {
		page.Jobs = append(page.Jobs, apiclient.JobRow{Name: "pushed_only", Count: 1})
	}
	return page, nil
}

// The jobs page takes the stream's metric messages when they answer its
// own question (the same window and prefix as its last answer from
// GET /api/v1/metrics), and only then: a page filtered by a prefix is
// not overwritten by the stream's rows for another.
func TestJobsPageTakesTheStreamsMetrics(t *testing.T) {
	d := newDashboard(t, testTokens)
	d.hub.Stop(context.Background())
	d.metrics = pushedMetrics{}
	d.startStream()
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/", "admin-token")
	b.goTo("/jobs")
	b.until("the pushed row", `!!document.querySelector('#jobs-table tr[data-job="pushed_only"]')`)
	b.do("filter", chromedp.SendKeys(chromedp.CSS("main input[data-filter]"), "etl"))
	b.until("the filtered answer, without the stream's rows for every job",
		`!document.querySelector('#jobs-table tr[data-job="pushed_only"]') && `+text("main")+`.includes("No runs in this window")`)
}

// One job's page (its row in the table, its last run and strip) changed
// only at its reads every 10 s: a run that failed meanwhile showed as
// nothing new for up to 10 s, while the stream had told the page. It now
// reads the job again when the stream reports a change of its runs. The
// page's periodic reads are held back (holdBack), so only the stream can
// bring the run; the other tenant's job of the same name never counts.
func TestOneJobFollowsItsRunsInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	now := time.Now()
	d.reportAs("admin-token", run("etl", "etl-1", "success", now.Add(-time.Minute), time.Second)...)
	d.reportAs("b-token", run("etl", "etl-b1", "failed", now.Add(-time.Minute), time.Second)...)
	b := newBrowser(t)
	b.holdBack()
	b.signIn(d.srv.URL+"/jobs/etl", "admin-token")
	b.until("the job, one run", cell("etl", "Runs")+` === "1" && document.querySelectorAll("#job-health .run").length === 1`)

	// Ended in the past: a run is counted in the 10 s step of its end,
	// and the window ends with the current step.
	d.reportAs("admin-token", run("etl", "etl-2", "failed", time.Now().Add(-2*time.Second), time.Second)...)
	d.reportAs("b-token", run("etl", "etl-b2", "failed", time.Now().Add(-2*time.Second), time.Second)...)
	b.until("the failed run in the row, the last run and the strip",
		cell("etl", "Runs")+` === "2" && `+cell("etl", "Failed")+` === "1" && `+
			text("#job-health")+`.includes("Last run failed") && document.querySelectorAll("#job-health .run").length === 2 && `+
			`!!document.querySelector('#job-health .run[data-task="etl-2"]') && !document.querySelector('#job-health .run[data-task="etl-b2"]')`)
	b.screenshot("one-job-live")
}
