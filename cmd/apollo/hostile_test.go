package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

// A correction whose reason is a pasted log of megabytes is refused with
// the field, and the server goes on: before, the bus handed the log a
// record over its 1 MiB limit, took the refusal for a failed disk and
// stopped the whole server ("the write-ahead log failed ... restart to
// recover"), in every mode, for one operator's request. The corrections
// accepted around it, of two tenants, hold after kill -9, and neither
// tenant can correct the other's run.
func TestALongCorrectionReasonIsRefused(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, _ *hook) {
		runs := map[string]string{}
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_load")
			runs[tenant] = fmt.Sprintf("%s_load-%d", tenant, d.seq.Load())
		}
		fix := func(tenant, taskID, reason string, want int) {
			d.t.Helper()
			d.do(tenant, "POST", "/api/v1/tasks/"+taskID+"/status", fmt.Sprintf(`{"status":"success","reason":%q}`, reason), nil, want)
		}
		var refused struct{ Error apollo.Error }
		d.do("acme", "POST", "/api/v1/tasks/"+runs["acme"]+"/status",
			fmt.Sprintf(`{"status":"success","reason":%q}`, strings.Repeat("stack trace line\n", 2<<20/17)), &refused, 400)
		if refused.Error.Field != "reason" || !strings.Contains(refused.Error.Message, fmt.Sprint(apollo.MaxReasonBytes)) {
			t.Errorf("a 2 MiB reason was refused with %+v, want the field reason and its limit", refused.Error)
		}
		fix("acme", runs["acme"], strings.Repeat("é", apollo.MaxReasonBytes/2), 200) // at the limit
		fix("globex", runs["acme"], "not mine", 404)
		fix("globex", runs["globex"], "re-ran by hand", 200)
		d.crash()
		for tenant, reason := range map[string]string{"acme": strings.Repeat("é", apollo.MaxReasonBytes/2), "globex": "re-ran by hand"} {
			var task apollo.Task
			d.do(tenant, "GET", "/api/v1/tasks/"+runs[tenant], "", &task, 200)
			last := task.History[len(task.History)-1]
			if task.Status != apollo.StatusSuccess || last.Kind != apollo.KindCorrection || last.Reason != reason {
				t.Errorf("tenant %s after kill -9: %s, last record %s %q, want corrected to success with its reason",
					tenant, task.Status, last.Kind, last.Reason[:min(len(last.Reason), 40)])
			}
		}
	})
}
