package main

import (
	"net/http"
	"strings"
	"testing"
)

// A body over limits.body_bytes is refused with 413 and a hint that fits
// what was sent: before, every route said "send fewer events per
// request", also to a rules file, a silence or an expectations file.
func TestOversizedBodyHintFitsTheRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d := newDeployment(t, false, newHook(t), deployOptions{config: "limits:\n  body_bytes: 8192\n"})
	d.start()
	t.Cleanup(d.logOnFailure)
	big := strings.Repeat("x", 9000)
	for i, tc := range []struct {
		method, path, body, want string
	}{
		{"POST", "/api/v1/events", `[{"taskID":"` + big + `"}]`, "fewer events"},
		{"PUT", "/api/v1/rules", "# " + big + "\n", "rules file"},
		{"POST", "/api/v1/silences", `{"comment":"` + big + `"}`, "silence"},
		{"PUT", "/api/v1/expectations", "# " + big + "\n", "expectations file"},
		{"POST", "/api/v1/tasks/t1/status", `{"reason":"` + big + `"}`, "correction"},
		{"POST", "/ping/nightly", big, "output"},
	} {
		tenant := tenants[i%2]
		var e struct {
			Error struct{ Code, Message, Hint string }
		}
		d.do(tenant, tc.method, tc.path, tc.body, &e, http.StatusRequestEntityTooLarge)
		if e.Error.Code != "too_large" || !strings.Contains(e.Error.Hint, tc.want) ||
			(tc.want != "fewer events" && strings.Contains(e.Error.Hint, "events")) {
			t.Errorf("%s %s as %s: %+v; want a hint about %q", tc.method, tc.path, tenant, e.Error, tc.want)
		}
	}
}
