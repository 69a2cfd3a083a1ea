package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/rules"
)

// Each different WINDOW of a tenant's rate rules is a table of all its
// jobs, read at every evaluation. A rules file of 8 640 rules, each with
// a WINDOW of its own (10s to 24h), was taken: with 2 000 jobs the server
// grew past 3 GB within half a minute, its first evaluation never ended
// and GET /api/v1/system stopped answering. Now a file with more than
// rules.MaxWindows different windows is refused at the rule past the
// bound, nothing changes (also across kill -9), and the other tenant's
// rules of the same names are taken.
func TestRulesWithTooManyWindowsAreRefused(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		file := func(windows int) string {
			var b strings.Builder
			for i := range windows {
				fmt.Fprintf(&b, "RULE r%d task_prefix: \"load_\" WINDOW: %ds THRESHOLD: failed >= 1 NOTIFY: hook\n", i, 10*(i+1))
			}
			return b.String()
		}
		before := "RULE r0 task_prefix: \"load_\" ON: failed NOTIFY: hook\n"
		d.do("acme", "PUT", "/api/v1/rules", before, nil, 200)
		var refused apiclient.ErrorBody
		d.do("acme", "PUT", "/api/v1/rules", file(rules.MaxWindows+1), &refused, 400)
		if p := refused.Errors; len(p) != 1 || p[0].Line != rules.MaxWindows+1 || !strings.Contains(p[0].Message, "different windows") {
			t.Fatalf("the refusal lists %+v, want one problem at line %d about different windows", p, rules.MaxWindows+1)
		}
		d.do("globex", "PUT", "/api/v1/rules", file(rules.MaxWindows), nil, 200)
		d.crash()
		for tenant, want := range map[string]string{"acme": before, "globex": file(rules.MaxWindows)} {
			var got struct{ Source string }
			d.do(tenant, "GET", "/api/v1/rules", "", &got, 200)
			if got.Source != want {
				t.Errorf("tenant %s: rules after kill -9 are %d bytes, want the %d bytes it put last and was answered 200 for", tenant, len(got.Source), len(want))
			}
		}
	})
}
