package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// A read of the metrics or the jobs' health right after a report
// includes the report, in each tenant: the reader asks after the server
// accepted the events. Before, both were built from observers the bus
// hands its changes to after answering, and a GET a moment after the POST
// missed the run now and then (a report then `apollo metrics`).
func TestMetricsAndHealthIncludeWhatWasAcceptedBeforeTheRead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := testCtx(t, time.Minute)
	const jobs = 200 // one request: its last events reach the observers last
	for i := range 10 {
		for _, tenant := range []string{"", "acme"} {
			prefix := fmt.Sprintf("readafter_%s_%d_", tenant, i)
			var b strings.Builder
			for j := range jobs {
				fmt.Fprintf(&b, `,{"taskID":"%[2]s%[3]d","name":"%[2]s%[3]d","status":"failed","sequence":1,"ts":%%[1]d}`, 0, prefix, j)
			}
			report(t, srv.addr, x.tokens[tenant], "["+b.String()[1:]+"]")
			c := x.client(t, srv, tenant)
			page, err := c.Metrics(ctx, 10*time.Minute, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Jobs) != jobs || page.Total.Failed != jobs {
				t.Fatalf("round %d, tenant %q: metrics right after the report: %d jobs, %d failed runs, want %d of each", i, tenant, len(page.Jobs), page.Total.Failed, jobs)
			}
			board, err := c.JobsHealth(ctx, apiclient.HealthQuery{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			if board.Total != jobs {
				t.Fatalf("round %d, tenant %q: health right after the report: %d jobs, want %d", i, tenant, board.Total, jobs)
			}
		}
	}
}
