package rules_test

import (
	"strings"
	"testing"

	"github.com/apollo-11/apollo/rules"
)

// An unnamed rule's name is its meaning (docs/rules.md, "Rule names"):
// editing another rule of the file, reordering the file or reformatting
// the rule keeps it; editing the rule itself gives a new one.
func TestUnnamedRuleNamesAcrossEdits(t *testing.T) {
	t.Parallel()
	names := func(src string) map[string]string { // prefix -> name
		t.Helper()
		rs, err := rules.Parse("rules.txt", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rs {
			m[r.Prefix] = r.Name
		}
		return m
	}
	const a = `RULE task_prefix: "etl_" WINDOW: 5m THRESHOLD: failed_rate > 5% NOTIFY: ops` + "\n"
	const b = `RULE task_prefix: "report_" ON: failed NOTIFY: ops` + "\n"
	before := names(a + b)
	if !strings.HasPrefix(before["etl_"], "rule_") || !strings.HasPrefix(before["report_"], "rule_") {
		t.Fatalf("generated names %v", before)
	}
	for what, src := range map[string]string{
		"reordered":   b + a,
		"reformatted": "RULE NOTIFY: ops\n  threshold: failed_rate>5%  window: 300s task_prefix: \"etl_\"\n" + b,
		"commented":   "# the ETL jobs\n" + a + "\n" + b,
	} {
		if got := names(src); got["etl_"] != before["etl_"] || got["report_"] != before["report_"] {
			t.Errorf("%s: names %v, want %v", what, got, before)
		}
	}
	edited := names(strings.Replace(a, "5%", "10%", 1) + b)
	if edited["etl_"] == before["etl_"] || edited["report_"] != before["report_"] {
		t.Errorf("after editing the etl_ rule: %v, was %v (it renames, the other keeps its name)", edited, before)
	}
}
