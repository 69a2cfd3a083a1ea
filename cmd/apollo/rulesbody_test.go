package main

import (
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
)

// A rules file over the body limit is answered 413 with a hint that reads
// as a sentence and says what to do; before, it said "the rules file the
// whole file must fit in one request". Nothing changes, for either tenant.
func TestARulesFileOverTheBodyLimitSaysWhatToDo(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := startDeployment(t, false, h, deployOptions{})
	before := "RULE r0 task_prefix: \"load_\" ON: failed NOTIFY: hook\n"
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", before, nil, 200)
	}
	big := strings.Repeat("# a comment line of a rules file that is far too long\n", 90_000) // 4.8 MB
	var refused apiclient.ErrorBody
	d.do("acme", "PUT", "/api/v1/rules", big, &refused, 413)
	if refused.Error == nil || !strings.HasPrefix(refused.Error.Hint, "the whole rules file must fit in one request: shorten it, or raise limits.body_bytes") {
		t.Errorf("the answer %+v, want the hint to say the whole rules file must fit in one request", refused.Error)
	}
	for _, tenant := range tenants {
		var got struct{ Source string }
		d.do(tenant, "GET", "/api/v1/rules", "", &got, 200)
		if got.Source != before {
			t.Errorf("tenant %s: rules %q after the refusal, want %q", tenant, got.Source, before)
		}
	}
}
