package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/apiclient"
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
