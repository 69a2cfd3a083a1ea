package web_test

import (
	"testing"

	"github.com/apollo-11/apollo/apiclient"
)

// prefixMetrics answers the stream's metric messages with one job named
// after the tenant and the prefix, which the REST answer never has, so
// that the page shows where its rows came from.
type prefixMetrics struct{}

func pushedJob(tenant, prefix string) string { return "pushed_" + tenant + "_" + prefix }

func (prefixMetrics) StreamSummaries(tenant, prefix string) (any, error) {
	return apiclient.MetricsPage{Window: "5m0s", Prefix: prefix, Jobs: []apiclient.JobRow{{Name: pushedJob(tenant, prefix), Count: 1}}}, nil
}

// The stream's timer asked for the metric message under the prefixes its
// clients had when it started, and a client that changed its prefix
// meanwhile was sent the new prefix's answer, then the old prefix's
// message (a server of a release before 4168e5d still does). The
// dashboard took it as the live table: the Jobs page, whose filter said
// b, dropped the stream's rows of b for the table it had read (its own
// check saw that the message did not answer its question) until the next
// message, 10 s on. The stream client now keeps a metric message only
// when its prefix is the filter's. The page is handed the old prefix's
// message as such a server sent it.
func TestOldPrefixMetricIsNotTakenInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	d.hub.Stop(t.Context())
	d.metrics = prefixMetrics{}
	d.startStream()
	b := newBrowser(t)
	b.gateStream()
	b.signIn(d.srv.URL+"/jobs", "admin-token")
	filter := `main input[data-filter]`
	row := func(prefix string) string {
		return `!!document.querySelector('#jobs-table tr[data-job="` + pushedJob("", prefix) + `"]')`
	}
	b.do("the prefix a", setValue(filter, "a", "input"))
	b.until("the stream's row of a", row("a"))
	b.do("the prefix b", setValue(filter, "b", "input"))
	b.until("the stream's row of b", row("b")+` && !`+row("a"))

	// The message of a, after the answer for b.
	b.eval(`(() => { window.__gate.inject({ type: "metric", prefix: "a",
		summaries: { window: "5m0s", prefix: "a", jobs: [{ name: "` + pushedJob("", "a") + `", count: 1 }] } }); return ""; })()`)
	if got := b.eval(`String(` + row("b") + ` && !` + row("a") + `)`); got != "true" {
		b.screenshot("old-prefix-metric")
		t.Fatalf("after the late message of a, the page lost the stream's row of b: %s", b.eval(text("#jobs-table")))
	}
}
