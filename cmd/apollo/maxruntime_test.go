package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A job's max_runtime counts from when the server received the run's
// start, as a timeoutMs does (docs/protocol.md): a reporter whose clock
// is an hour behind, or a start delivered late, does not have its run
// timed out at once, in two tenants, across kill -9. Before, the
// evaluator counted from the reported ts, so the first evaluation after
// such a start found the run too long and timed it out, and the run's
// real end, a second later, was refused: the run showed timeout.
func TestMaxRuntimeCountsFromReceipt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := testCtx(t, 2*time.Minute)
	def := x.client(t, srv, "")
	for tenant, src := range map[string]string{
		"":     expectFile + "  - {job: slow, max_runtime: 1m}\n",
		"acme": "expectations:\n  - {job: slow, max_runtime: 1m}\n",
	} {
		if _, err := x.client(t, srv, tenant).PutExpectations(ctx, []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	behind := time.Now().Add(-time.Hour).UnixMilli()
	for _, tenant := range []string{"", "acme"} {
		report(t, srv.addr, x.tokens[tenant], fmt.Sprintf(`[{"taskID":"s1","name":"slow","status":"running","sequence":1,"ts":%d},
{"taskID":"s2","name":"slow","status":"running","sequence":1,"ts":%d}]`, behind, behind))
	}
	// Evaluations after the starts: the file's etl_extract is missed at
	// each, so one expected after now has judged them.
	missedAfter(t, ctx, def, def, "etl_extract", time.Now())
	ended := func(p *proc, id, when string) {
		t.Helper()
		for _, tenant := range []string{"", "acme"} {
			c := x.client(t, p, tenant)
			task, err := c.Task(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != apollo.StatusRunning {
				t.Errorf("%s: tenant %q: %s started (by its reporter's clock) an hour ago, 1m max_runtime, is %s, not running: %+v", when, tenant, id, task.Status, task.History)
				continue
			}
			report(t, p.addr, x.tokens[tenant], fmt.Sprintf(`{"taskID":%q,"status":"success","sequence":2,"ts":%d}`, id, time.Now().Add(-time.Hour).UnixMilli()))
		}
	}
	ended(srv, "s1", "live")
	srv.kill()
	srv = x.start(t)
	def = x.client(t, srv, "")
	missedAfter(t, ctx, def, def, "etl_extract", time.Now())
	ended(srv, "s2", "after kill -9")
}
