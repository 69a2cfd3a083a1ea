package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A running run whose reporter's clock is ahead still ends at its
// deadline (lateness[].timeout here), counted from when the server
// received its start, across kill -9, in two tenants: "every run ends"
// (docs/protocol.md, timeoutMs). Before, the deadline counted from the
// reported ts when that was later, so a ts a day ahead kept the run
// running a day past its timeout (a ts in 2199, until then).
func TestARunAheadOfTheClockStillTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	f, err := os.OpenFile(x.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "lateness:\n  - {prefix: \"skew_\", timeout: 3s}\n")
	f.Close()
	srv := x.start(t)
	ahead := time.Now().Add(24 * time.Hour).UnixMilli()
	for _, tenant := range []string{"", "acme"} {
		report(t, srv.addr, x.tokens[tenant], fmt.Sprintf(`[{"taskID":"s1","name":"skew_job","status":"running","sequence":1,"ts":%d},
{"taskID":"n1","name":"skew_job","status":"running","sequence":1,"ts":%d}]`, ahead, time.Now().UnixMilli()))
	}
	srv.kill()
	srv = x.start(t)
	ctx := testCtx(t, time.Minute)
	for _, tenant := range []string{"", "acme"} {
		c := x.client(t, srv, tenant)
		for _, id := range []string{"n1", "s1"} {
			var task apollo.Task
			eventually(t, 30*time.Second, fmt.Sprintf("tenant %q: %s timed out", tenant, id), func() bool {
				task, err = c.Task(ctx, id)
				return err == nil && task.Status == apollo.StatusTimeout
			})
			if task.TimeoutMs != 3000 || task.Tenant != tenant {
				t.Errorf("tenant %q: %+v", tenant, task)
			}
		}
	}
}
