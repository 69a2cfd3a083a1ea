package rules

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

// goodInhibits are inhibit rules in both forms, for the fuzzer's corpus.
var goodInhibits = []string{
	`INHIBIT etl_down SOURCE: rule=etl_failed, severity=critical TARGET: task_prefix="report_", severity!=critical EQUAL: team`,
	"inhibit source: Rule=a target: team=\"数据 平台\", tier=1 equal: group\nRULE task_prefix: \"a\" ON: failed, missed",
	`{"rules": [{"taskPrefix": "x", "on": ["missed"]}], "inhibits": [{"name": "i", "source": ["rule=a"], "target": ["task_prefix=\"报表_\""], "equal": ["team"]}]}`,
}

func parseFile(t testing.TB, src string) *File {
	t.Helper()
	f, err := ParseFile("rules.txt", []byte(src))
	if err != nil {
		t.Fatalf("ParseFile(%s): %v", src, err)
	}
	return f
}

func TestParseInhibit(t *testing.T) {
	t.Parallel()
	want := &Inhibit{
		Name:   "etl_down",
		Source: []Matcher{{Name: "rule", Value: "etl_failed"}, {Name: "severity", Value: "critical"}},
		Target: []Matcher{{Name: "task_prefix", Value: "report_"}, {Name: "severity", Value: "critical", Not: true}, {Name: "team", Value: "数据 平台"}},
		Equal:  []string{"team", "group"},
	}
	for name, src := range map[string]string{
		"text": `# the reports are echoes of the warehouse load
INHIBIT etl_down
  SOURCE: rule=etl_failed, SEVERITY=Critical
  TARGET: task_prefix="report_", severity != critical,
          team="数据 平台"
  EQUAL:  team, group
RULE etl_failed task_prefix: "etl_" ON: failed SEVERITY: critical`,
		"JSON": `{"rules": [{"name": "etl_failed", "taskPrefix": "etl_", "on": ["failed"], "severity": "critical"}],
 "inhibits": [{"name": "etl_down", "source": ["rule=etl_failed", "severity=critical"],
   "target": ["task_prefix=report_", "severity!=critical", "team=\"数据 平台\""], "equal": ["team", "group"]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := parseFile(t, src)
			if len(f.Rules) != 1 || len(f.Inhibits) != 1 {
				t.Fatalf("got %d rules and %d inhibit rules", len(f.Rules), len(f.Inhibits))
			}
			if d := diffInhibits(f.Inhibits[0], want); d != "" {
				t.Error(d)
			}
			// Parse returns the rules alone.
			rs, err := Parse("rules.txt", []byte(src))
			if err != nil || len(rs) != 1 || rs[0].Name != "etl_failed" {
				t.Errorf("Parse = %v, %v", rs, err)
			}
		})
	}
	if got, wantText := want.String(), `INHIBIT etl_down SOURCE: rule=etl_failed, severity=critical TARGET: task_prefix=report_, severity!=critical, team="数据 平台" EQUAL: team, group`; got != wantText {
		t.Errorf("String:\n got %s\nwant %s", got, wantText)
	}
	js, err := want.MarshalJSON()
	if wantJS := `{"name":"etl_down","source":["rule=etl_failed","severity=critical"],"target":["task_prefix=report_","severity!=critical","team=\"数据 平台\""],"equal":["team","group"]}`; err != nil || string(js) != wantJS {
		t.Errorf("MarshalJSON:\n got %s %v\nwant %s", js, err, wantJS)
	}
}

// TestInhibitGeneratedName: like a rule, an unnamed inhibit rule is named
// after its canonical text.
func TestInhibitGeneratedName(t *testing.T) {
	t.Parallel()
	a := parseFile(t, `INHIBIT SOURCE: rule=a TARGET: rule=b`).Inhibits[0]
	b := parseFile(t, "inhibit\n target: RULE=b\n source: rule=\"a\"").Inhibits[0]
	c := parseFile(t, `INHIBIT SOURCE: rule=a TARGET: rule=c`).Inhibits[0]
	if !strings.HasPrefix(a.Name, "inhibit_") || a.Name != b.Name || a.Name == c.Name {
		t.Errorf("names %s %s %s", a.Name, b.Name, c.Name)
	}
}

// badInhibits are wrong inhibit rules with the exact report each gets.
var badInhibits = []struct{ name, src, want string }{
	{"no SOURCE", `INHIBIT TARGET: rule=b`,
		`rules.txt:1:1: inhibit rule has no SOURCE (expected SOURCE: and a matcher such as severity=critical); SOURCE says which firing alerts hold others, TARGET which alerts they hold`},
	{"a rule's key", `INHIBIT x SOURCE: rule=a TARGET: rule=b WINDOW: 5m`,
		`rules.txt:1:41: unknown key "WINDOW" (expected a key); keys are SOURCE, TARGET, EQUAL`},
	{"misspelt key", `INHIBIT x SOURCE: rule=a TARGTE: rule=b`,
		`rules.txt:1:26: unknown key "TARGTE" (expected a key); did you mean TARGET?`},
	{"name with a colon", `INHIBIT quiet: SOURCE: rule=a TARGET: rule=b`,
		`rules.txt:1:9: unknown key "quiet" (expected a key); an inhibit rule name has no colon: INHIBIT quiet SOURCE: ...`},
	{"an inhibit key in a rule", `RULE task_prefix: "a" ON: failed SOURCE: rule=a`,
		`rules.txt:1:34: unknown key "SOURCE" (expected a key); keys are task_prefix, WINDOW, THRESHOLD, DURATION, KEEP, BY, ON, GROUP_WINDOW, SEVERITY, NOTIFY, LABELS`},
	{"matcher without a value", `INHIBIT SOURCE: rule= TARGET: rule=b`,
		`rules.txt:1:23: unexpected "TARGET" (expected a value: a word or a quoted string)`},
	{"matcher without an operator", `INHIBIT SOURCE: severity critical TARGET: rule=b`,
		`rules.txt:1:26: unexpected "critical" (expected = or != after severity)`},
	{"matcher with another comparison", `INHIBIT SOURCE: tier > 1 TARGET: rule=b`,
		`rules.txt:1:22: unexpected ">" (expected = or != after tier)`},
	{"unknown severity", `INHIBIT SOURCE: severity=critcal TARGET: rule=b`,
		`rules.txt:1:17: unknown severity "critcal" (expected info, warning or critical); did you mean critical?`},
	{"bad label name", `INHIBIT SOURCE: rule=a TARGET: "team"=x`,
		`rules.txt:1:32: unexpected string "team" (expected a matcher such as severity=critical)`},
	{"matcher twice", `INHIBIT SOURCE: rule=a, rule=a TARGET: rule=b`,
		`rules.txt:1:25: matcher rule=a listed twice`},
	{"EQUAL twice", `INHIBIT SOURCE: rule=a TARGET: rule=b EQUAL: team, team`,
		`rules.txt:1:52: team listed twice`},
	{"EQUAL not a name", `INHIBIT SOURCE: rule=a TARGET: rule=b EQUAL: team, "the team"`,
		`rules.txt:1:52: unexpected string "the team" (expected a label name, or group)`},
	{"a block word as a value", "INHIBIT SOURCE: rule=a TARGET: team=\nRULE task_prefix: \"a\" ON: failed",
		`rules.txt:2:1: unexpected "RULE" (expected a value: a word or a quoted string)`},
	{"duplicate inhibit names", "INHIBIT q SOURCE: rule=a TARGET: rule=b\nINHIBIT q SOURCE: rule=a TARGET: rule=c",
		`rules.txt:2:1: duplicate inhibit rule name q (first at 1:1); give each inhibit rule its own name`},
	{"the same inhibit rule twice", "INHIBIT SOURCE: rule=a TARGET: rule=b\nINHIBIT SOURCE: rule=a TARGET: rule=b",
		`rules.txt:2:1: duplicate inhibit rule name ` + parseFileName(`INHIBIT SOURCE: rule=a TARGET: rule=b`) + ` (first at 1:1); the two inhibit rules are the same; remove one`},
	{"a channel named INHIBIT", "RULE task_prefix: \"a\" ON: failed NOTIFY: email, inhibit\nSOURCE: rule=a TARGET: rule=b",
		`rules.txt:1:49: unexpected "inhibit" (expected a channel name)`},
	{"JSON unknown field", `{"inhibits": [{"source": ["rule=a"], "target": ["rule=b"], "equals": ["team"]}]}`,
		`rules.txt:1:60: unknown field "equals" in inhibits[0] (expected a known field); did you mean equal?`},
	{"JSON matcher syntax", "{\"inhibits\": [{\"source\": [\"rule=a\"],\n  \"target\": [\"severity=critical\", \"team==x\"]}]}",
		`rules.txt:2:40: inhibits[0].target: unexpected "==" (expected = or != after team)`},
	{"JSON matcher with trailing text", `{"inhibits": [{"source": ["rule=a b"], "target": ["rule=b"]}]}`,
		`rules.txt:1:35: inhibits[0].source: unexpected "b" (expected the end of the matcher)`},
	{"JSON bad severity", `{"inhibits": [{"source": ["severity=high"], "target": ["rule=b"]}]}`,
		`rules.txt:1:27: inhibits[0].source: unknown severity "high" (expected info, warning or critical)`},
	{"JSON no target", `{"inhibits": [{"name": "x", "source": ["rule=a"], "target": []}]}`,
		`rules.txt:1:15: inhibits[0]: inhibit rule has no target (expected target: and a matcher such as severity=critical); SOURCE says which firing alerts hold others, TARGET which alerts they hold`},
	{"JSON inhibits not an array", `{"inhibits": {}}`,
		`rules.txt:1:14: inhibits is an object (expected an array of inhibit rule objects)`},
	{"JSON not an inhibit rule", `{"inhibits": ["rule=a"]}`,
		`rules.txt:1:15: inhibits[0] is string "rule=a" (expected an inhibit rule object {...})`},
	{"JSON top-level field", `{"inhibit": []}`,
		`rules.txt:1:2: unknown field "inhibit" in the top-level object (expected a known field); did you mean inhibits?`},
}

// parseFileName is the generated name of the one inhibit rule in src.
func parseFileName(src string) string {
	f, err := ParseFile("", []byte(src))
	if err != nil {
		panic(err)
	}
	return f.Inhibits[0].Name
}

func TestParseInhibitBad(t *testing.T) {
	t.Parallel()
	for _, tt := range badInhibits {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := ParseFile("rules.txt", []byte(tt.src))
			if err == nil {
				t.Fatalf("ParseFile succeeded: %v", f)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}

// TestOccurrences: ON takes what expectations find besides statuses, and
// missed is a metric.
func TestOccurrences(t *testing.T) {
	t.Parallel()
	r := parseOne(t, `RULE cron task_prefix: "cron." ON: Missed, failed, too_short, flapping, too_often`)
	if r.String() != `RULE cron task_prefix: "cron." ON: failed, missed, too_short, flapping, too_often GROUP_WINDOW: 1m SEVERITY: warning` || !r.IsEvent() {
		t.Errorf("String = %s", r)
	}
	checkRoundTrip(t, r)
	js, _ := r.MarshalJSON()
	if want := `{"name":"cron","taskPrefix":"cron.","on":["failed","missed","too_short","flapping","too_often"],"groupWindow":"1m","severity":"warning"}`; string(js) != want {
		t.Errorf("JSON %s\nwant %s", js, want)
	}
	x := parseOne(t, `RULE task_prefix: "cron." WINDOW: 1h THRESHOLD: missed > 0`).Expr
	if m := x.Metrics(); len(m) != 1 || m[0] != MetricMissed || MetricMissed.Unit() != "runs" {
		t.Errorf("metrics %v", m)
	}
	for _, c := range []struct{ src, want string }{
		{`RULE task_prefix: "a" ON: missed, MISSED`, `rules.txt:1:35: missed listed twice`},
		{`RULE task_prefix: "a" ON: mised`, `rules.txt:1:27: unknown status "mised" (expected pending, running, success, failed, timeout, manual_blocked); did you mean missed?`},
		{`RULE task_prefix: "a" ON: late`, `rules.txt:1:27: unknown status "late" (expected pending, running, success, failed, timeout, manual_blocked); ON also takes what expectations find: missed, too_short, too_often, flapping`},
		{`[{"taskPrefix": "a", "on": ["lost"]}]`, `rules.txt:1:29: [0].on: unknown status "lost" (expected pending, running, success, failed, timeout, manual_blocked); on also takes what expectations find: missed, too_short, too_often, flapping`},
	} {
		if _, err := Parse("rules.txt", []byte(c.src)); err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.src, err, c.want)
		}
	}
}

func alertOf(tenant, rule, group string, sev apollo.Severity, labels map[string]string) apollo.Alert {
	return apollo.Alert{ID: tenant + "/" + rule + "/" + group, Tenant: tenant, Rule: rule, Group: group, State: apollo.AlertFiring, Severity: sev, Labels: labels}
}

// TestInhibits is what the alert engine asks: is this alert held, and by
// which rule and alert.
func TestInhibits(t *testing.T) {
	t.Parallel()
	f := parseFile(t, `
INHIBIT warehouse SOURCE: rule=warehouse_failed TARGET: task_prefix="report_", severity!=critical EQUAL: team
INHIBIT missed_holds_failures SOURCE: rule=missed TARGET: rule=failures EQUAL: group
INHIBIT critical_holds_warnings SOURCE: severity=critical TARGET: severity=warning
`)
	data := map[string]string{"team": "data"}
	cause := alertOf("a", "warehouse_failed", "etl_load", apollo.SeverityCritical, data)
	missedNightly := alertOf("a", "missed", "nightly", apollo.SeverityInfo, nil)
	pending := alertOf("a", "warehouse_failed", "etl_other", apollo.SeverityCritical, map[string]string{"team": "web"})
	pending.State = apollo.AlertPending
	otherTenant := alertOf("b", "warehouse_failed", "etl_load", apollo.SeverityCritical, map[string]string{"team": "web"})
	firing := []apollo.Alert{pending, otherTenant, missedNightly, cause}
	for _, c := range []struct {
		name   string
		target apollo.Alert
		rule   string // "" when not held
		by     string
	}{
		{"a report of the same team", alertOf("a", "reports_failed", "report_daily", apollo.SeverityWarning, data), "warehouse", cause.ID},
		{"a report of another team (the web cause is only pending, or another tenant's)", alertOf("a", "reports_failed", "report_daily", apollo.SeverityInfo, map[string]string{"team": "web"}), "", ""},
		{"a critical report", alertOf("a", "reports_failed", "report_daily", apollo.SeverityCritical, data), "", ""},
		{"not a report", alertOf("a", "x", "etl_extract", apollo.SeverityInfo, data), "", ""},
		{"failures of the missed job", alertOf("a", "failures", "nightly", apollo.SeverityInfo, nil), "missed_holds_failures", missedNightly.ID},
		{"failures of another job", alertOf("a", "failures", "weekly", apollo.SeverityInfo, nil), "", ""},
		{"any warning, held by the critical cause", alertOf("a", "x", "y", apollo.SeverityWarning, nil), "critical_holds_warnings", cause.ID},
		{"a warning of another tenant", alertOf("c", "x", "y", apollo.SeverityWarning, nil), "", ""},
	} {
		in, by := InhibitedBy(f.Inhibits, &c.target, firing)
		got, gotBy := "", ""
		if in != nil {
			got, gotBy = in.Name, by.ID
		}
		if got != c.rule || gotBy != c.by {
			t.Errorf("%s: held by %q (%s), want %q (%s)", c.name, got, gotBy, c.rule, c.by)
		}
	}
}

// TestInhibitsNotItself: an alert does not hold itself, and alerts that
// match both sides of a rule do not hold each other; an alert that
// matches only the target side is still held by them.
func TestInhibitsNotItself(t *testing.T) {
	t.Parallel()
	in := parseFile(t, `INHIBIT SOURCE: task_prefix="etl_" TARGET: task_prefix="etl_"`).Inhibits[0]
	a := alertOf("a", "r", "etl_a", apollo.SeverityWarning, nil)
	b := alertOf("a", "r", "etl_b", apollo.SeverityWarning, nil)
	if in.Inhibits(&a, &a) || in.Inhibits(&a, &b) || in.Inhibits(&b, &a) {
		t.Error("alerts on both sides hold each other")
	}
	narrow := parseFile(t, `INHIBIT SOURCE: task_prefix="etl_" TARGET: task_prefix="etl_b"`).Inhibits[0]
	if !narrow.Inhibits(&a, &b) || narrow.Inhibits(&b, &a) {
		t.Error("etl_a should hold etl_b, not the other way round")
	}
}

// randInhibit builds a valid inhibit rule directly, with the awkward
// values a text form must survive.
func randInhibit(r *rand.Rand, i int) *Inhibit {
	values := []string{"x", "批处理", `a"b\c`, "1", "a b", "RULE", "inhibit", "", "team-1.x"}
	names := []string{"rule", "group", "task_prefix", "team", "tier_2", "severity"}
	ms := func() []Matcher {
		var out []Matcher
		for j := range 1 + r.IntN(4) {
			m := Matcher{Name: names[r.IntN(len(names))], Value: values[r.IntN(len(values))], Not: r.IntN(2) == 0}
			switch m.Name {
			case "severity":
				m.Value = []string{"info", "warning", "critical"}[r.IntN(3)]
			case "rule":
				m.Value = fmt.Sprintf("r%d", j)
			}
			if !containsMatcher(out, m) {
				out = append(out, m)
			}
		}
		return out
	}
	in := &Inhibit{Source: ms(), Target: ms()}
	for _, n := range r.Perm(3)[:r.IntN(4)] {
		in.Equal = append(in.Equal, []string{"team", "group", "env"}[n])
	}
	if r.IntN(2) == 0 {
		in.Name = fmt.Sprintf("inhibit.%d", i)
	} else {
		in.Name = parseFileName(in.String())
	}
	return in
}

func containsMatcher(ms []Matcher, m Matcher) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// checkInhibitRoundTrip: text -> Inhibit -> JSON -> Inhibit -> text, and
// JSON through encoding/json, all give the inhibit rule we started with.
func checkInhibitRoundTrip(t testing.TB, want *Inhibit) {
	t.Helper()
	f, err := ParseFile("", []byte(want.String()))
	if err != nil || len(f.Inhibits) != 1 {
		t.Fatalf("ParseFile(%s) = %v, %v", want, f, err)
	}
	if d := diffInhibits(want, f.Inhibits[0]); d != "" {
		t.Fatalf("text round trip: %s", d)
	}
	js, err := f.Inhibits[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	fj, err := ParseFile("", []byte(`{"inhibits": [`+string(js)+`]}`))
	if err != nil || len(fj.Inhibits) != 1 {
		t.Fatalf("JSON round trip of %s: %v", js, err)
	}
	if d := diffInhibits(want, fj.Inhibits[0]); d != "" {
		t.Fatalf("JSON round trip of %s: %s", js, d)
	}
	var viaStd Inhibit
	if err := json.Unmarshal(js, &viaStd); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", js, err)
	}
	if d := diffInhibits(want, &viaStd); d != "" {
		t.Fatalf("encoding/json round trip: %s", d)
	}
}

func TestInhibitRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	var text strings.Builder
	var all []*Inhibit
	var rules []*Rule
	for i := range 300 {
		in := randInhibit(r, i)
		checkInhibitRoundTrip(t, in)
		all = append(all, in)
		rule := randRule(r, i)
		rules = append(rules, rule)
		fmt.Fprintf(&text, "%s\n%s\n", in, rule)
	}
	// Rules and inhibit rules mixed in one file, in each form.
	js, err := json.Marshal(map[string]any{"rules": rules, "inhibits": all})
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"text": text.String(), "JSON": string(js)} {
		// Saved: the random windows are more than MaxWindows.
		f, err := ParseSaved(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(f.Rules) != len(rules) || len(f.Inhibits) != len(all) {
			t.Fatalf("%s: %d rules and %d inhibit rules", name, len(f.Rules), len(f.Inhibits))
		}
		for i := range all {
			if d := diffInhibits(all[i], f.Inhibits[i]); d != "" {
				t.Fatalf("%s, inhibit rule %d: %s", name, i, d)
			}
			if d := diffRules(rules[i], f.Rules[i]); d != "" {
				t.Fatalf("%s, rule %d: %s", name, i, d)
			}
		}
	}
}

// MayHaveInhibits is false only for a file that cannot hold inhibit rules:
// every file that has one, in either form and any case, says so.
func TestMayHaveInhibits(t *testing.T) {
	for _, src := range []string{
		"INHIBIT a SOURCE: rule=x TARGET: rule=y\n",
		"RULE x task_prefix: \"x\" ON: failed\ninhibit a SOURCE: rule=x TARGET: rule=y\n",
		"iNhIbIt a SOURCE: rule=x TARGET: rule=y",
		`{"rules": [], "inhibits": [{"name": "a", "source": ["rule=x"], "target": ["rule=y"]}]}`,
		`{"rules": [], "\u0069nhibits": [{"name": "a", "source": ["rule=x"], "target": ["rule=y"]}]}`,
	} {
		f, err := ParseFile("", []byte(src))
		if err != nil || len(f.Inhibits) != 1 {
			t.Fatalf("%q: %v, %+v", src, err, f)
		}
		if !MayHaveInhibits([]byte(src)) {
			t.Errorf("%q: MayHaveInhibits = false for a file with an inhibit rule", src)
		}
	}
	for _, src := range []string{"", "RULE x task_prefix: \"x\" ON: failed\n", "inhibi", `{"rules": []}`} {
		if MayHaveInhibits([]byte(src)) {
			t.Errorf("%q: MayHaveInhibits = true", src)
		}
	}
}
