package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/metrics"
)

// A report more than a minute ahead of the server's clock is not counted
// in the metrics (metrics.MaxSkew); one just under is. That is judged
// against when the server received it, so recovery rebuilds the same
// metrics: after kill -9 the jobs' rows and health are what they were, in
// two tenants, in the all-in-one server and in the three processes (whose
// bus copies its metrics to Redis). Before, the judgement used the clock
// at the moment the record was applied, and the replay at the restart ran
// a few seconds later: the report dropped live was counted after the
// restart, and its job appeared on the board with a run nobody saw before.
func TestTooNewIsJudgedAtReceipt(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, _ *hook) {
		// The margin is what the server may take to receive the reports
		// and still find the first just over the limit; the test waits
		// for the server's clock to pass it before the kill, so that a
		// replay judging by its own clock would count the report.
		const margin = 2 * time.Second
		t0 := time.Now()
		over := t0.Add(metrics.MaxSkew + margin).UnixMilli()
		under := t0.Add(metrics.MaxSkew - margin).UnixMilli()
		for _, tenant := range tenants {
			d.do(tenant, "POST", "/api/v1/events", fmt.Sprintf(
				`[{"taskID":"over","name":"ahead_over","sequence":1,"status":"success","ts":%d},
{"taskID":"under","name":"ahead_under","sequence":1,"status":"success","ts":%d}]`, over, under), nil, 200)
		}
		var task apollo.Task
		d.do(tenants[0], "GET", "/api/v1/tasks/over", "", &task, 200)
		if len(task.History) == 0 || over-task.History[0].ReceivedAt <= metrics.MaxSkew.Milliseconds() {
			t.Fatalf("the server received the report %v after it was made; the test needs it within %v: %+v", time.Duration(task.History[0].ReceivedAt-t0.UnixMilli())*time.Millisecond, margin, task.History)
		}
		type view struct {
			jobs   []string // on the board, with their runs
			counts []int64  // the metrics rows' counts
		}
		read := func(tenant string) view {
			var b apiclient.HealthBoard
			d.do(tenant, "GET", "/api/v1/jobs/health?prefix=ahead_", "", &b, 200)
			var v view
			for _, j := range b.Jobs {
				for _, r := range j.Runs {
					v.jobs = append(v.jobs, fmt.Sprintf("%s:%s:%s", j.Name, r.TaskID, r.Status))
				}
			}
			var p apiclient.MetricsPage
			d.do(tenant, "GET", "/api/v1/metrics?window=1h&prefix=ahead_", "", &p, 200)
			for _, r := range p.Jobs {
				v.jobs = append(v.jobs, "row:"+r.Name)
				v.counts = append(v.counts, r.Count)
			}
			slices.Sort(v.jobs)
			return v
		}
		want := view{jobs: []string{"ahead_under:under:success"}}
		check := func(when string) {
			t.Helper()
			for _, tenant := range tenants {
				got := read(tenant)
				// The row of ahead_under may be listed (with nothing in the
				// window yet: its run is in the future) or not; ahead_over
				// has no row and no run.
				got.jobs = slices.DeleteFunc(got.jobs, func(s string) bool { return s == "row:ahead_under" })
				if !slices.Equal(got.jobs, want.jobs) || slices.ContainsFunc(got.counts, func(n int64) bool { return n != 0 }) {
					t.Errorf("%s: tenant %s sees %+v, want %+v", when, tenant, got, want)
				}
			}
		}
		check("live")
		eventually(t, 30*time.Second, "the server's clock past the report's limit", func() bool {
			var b apiclient.HealthBoard
			d.do(tenants[1], "GET", "/api/v1/jobs/health", "", &b, 200)
			return b.Now > over-metrics.MaxSkew.Milliseconds()
		})
		d.crash()
		check("after kill -9")
	})
}
