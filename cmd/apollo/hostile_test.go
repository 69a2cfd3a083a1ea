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

// Silences are bounded like what they match, and a start too far ahead is
// refused with its field: before, a silence could hold a rule name or
// label of megabytes (up to 1000 per tenant, each change saving and
// logging them all again: 5 silences of 3 MiB took the server from 24 to
// 150 MB), and one starting at 9999-12-31T23:00Z for 2h was answered 503
// "could not be saved" (its end is past the year 9999 that JSON times can
// hold), with an error in the log. The silences accepted around them, of
// two tenants, hold after kill -9.
func TestSilencesOutOfBoundsAreRefused(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, _ *hook) {
		long := strings.Repeat("n", apollo.MaxNameBytes+1)
		for _, tc := range []struct{ body, field string }{
			{`{"rule":"` + long + `","duration":"2h","comment":"c"}`, "rule"},
			{`{"prefix":"` + long + `","duration":"2h","comment":"c"}`, "prefix"},
			{`{"labels":{"` + long + `":"v"},"duration":"2h","comment":"c"}`, "labels"},
			{`{"labels":{"team":"` + strings.Repeat("v", 3<<20) + `"},"duration":"2h","comment":"c"}`, "labels"},
			{`{"rule":"r","startsAt":"9999-12-31T23:00:00Z","duration":"2h","comment":"c"}`, "startsAt"},
			{`{"rule":"r","startsAt":"2999-01-01T00:00:00Z","duration":"2h","comment":"c"}`, "startsAt"},
			{`{"rule":"r","endsAt":"9999-12-31T23:59:59Z","comment":"c"}`, "endsAt"},
		} {
			var refused struct{ Error apollo.Error }
			d.do("acme", "POST", "/api/v1/silences", tc.body, &refused, 400)
			if refused.Error.Field != tc.field || strings.Contains(refused.Error.Message, "2562047h") {
				t.Errorf("%.80s: refused with %+v, want the field %s", tc.body, refused.Error, tc.field)
			}
		}
		at := map[string]string{
			"acme":   d.silence("acme", `"rule":"`+long[1:]+`","labels":{"team":"`+strings.Repeat("v", 1<<10)+`"}`),
			"globex": d.silence("globex", `"prefix":"globex_"`),
		}
		d.crash()
		for _, tenant := range tenants {
			var got struct{ Silences []struct{ ID string } }
			d.do(tenant, "GET", "/api/v1/silences", "", &got, 200)
			if len(got.Silences) != 1 || got.Silences[0].ID != at[tenant] {
				t.Errorf("tenant %s: silences after kill -9 %+v, want only %s", tenant, got.Silences, at[tenant])
			}
		}
	})
}
