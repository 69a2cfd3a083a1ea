package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

const seed = `RULE task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m NOTIFY: dingtalk, email`

// seedCanonical is the seed's rule with every default written out; its
// SHA-256 names the rule.
const seedCanonical = `RULE task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m SEVERITY: warning NOTIFY: dingtalk, email`

func hashName(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return "rule_" + hex.EncodeToString(sum[:])[:8]
}

func mustExpr(t testing.TB, s string) *Expr {
	t.Helper()
	x, err := ParseExpr(s)
	if err != nil {
		t.Fatalf("ParseExpr(%q): %v", s, err)
	}
	return x
}

func seedRule(t testing.TB) *Rule {
	return &Rule{
		Name: hashName(seedCanonical), Prefix: "batch_", Window: 5 * time.Minute, Duration: 2 * time.Minute,
		Expr: mustExpr(t, "failed_rate > 0.05"), Notify: []string{"dingtalk", "email"}, Severity: apollo.SeverityWarning,
	}
}

func TestParseGood(t *testing.T) {
	t.Parallel()
	allRate := &Rule{
		Name: "etl.nightly-slow", Prefix: `批处理_"x"\`, Window: 90 * time.Minute, Duration: 90 * time.Second,
		Keep: 500 * time.Millisecond, Expr: mustExpr(t, "pct_change(avg_cost) > 50% and count >= 10"),
		Notify: []string{"feishu"}, Severity: apollo.SeverityCritical, By: "name",
		Labels: map[string]string{"team": "data", "runbook": "see wiki/etl", "tier": "1"},
	}
	allEvent := &Rule{
		Name: "any_failure", Prefix: "", GroupWindow: 30 * time.Second,
		On:     []apollo.Status{apollo.StatusFailed, apollo.StatusTimeout, apollo.StatusManualBlocked},
		Notify: []string{"wecom", "slack.ops"}, Severity: apollo.SeverityInfo, Labels: map[string]string{"k": "v"},
	}
	eventDefaults := &Rule{Name: "f", Prefix: "p", GroupWindow: time.Minute, On: []apollo.Status{apollo.StatusFailed}, Severity: apollo.SeverityWarning}
	tests := []struct {
		name string
		src  string
		want []*Rule
	}{
		{"seed on one line", seed, []*Rule{seedRule(t)}},
		{"seed over lines with comments and other case", `
# the seed's rule, reformatted
rule   task_prefix: "batch_"   # jobs named batch_*
   window: 5m
   Threshold: FAILED_RATE > 0.05
   duration : 2m
   notify: dingtalk,
           email
`, []*Rule{seedRule(t)}},
		{"every key of a rate rule", `RULE etl.nightly-slow task_prefix: "批处理_\"x\"\\" WINDOW: 1.5h
  THRESHOLD: pct_change(avg_cost) > 50% AND count >= 10 DURATION: 90s KEEP: 500ms
  NOTIFY: feishu SEVERITY: critical BY: name LABELS: team=data, runbook="see wiki/etl", tier=1`, []*Rule{allRate}},
		{"every key of an event rule", `RULE any_failure task_prefix: "" ON: failed, TIMEOUT, manual_blocked
GROUP_WINDOW: 30s NOTIFY: wecom, slack.ops SEVERITY: Info LABELS: k="v"`, []*Rule{allEvent}},
		{"defaults", "RULE f task_prefix: \"p\" ON: failed\r\nRULE g task_prefix: \"q\" THRESHOLD: count == 0\r\n", []*Rule{
			eventDefaults,
			{Name: "g", Prefix: "q", Window: time.Minute, Expr: mustExpr(t, "count == 0"), Severity: apollo.SeverityWarning},
		}},
		{"keys in any order", `RULE f ON: failed task_prefix: "p"`, []*Rule{eventDefaults}},
		{"byte order mark", "\xef\xbb\xbfRULE f task_prefix: \"p\" ON: failed", []*Rule{eventDefaults}},
		{"empty file", "", nil},
		{"only comments", "# nothing yet\n\n   # really\n", nil},
		{"JSON object", `{"rules":[{"taskPrefix":"batch_","window":"5m","threshold":"failed_rate > 0.05",
			"duration":"2m","keep":"0s","notify":["dingtalk","email"]}]}`, []*Rule{seedRule(t)}},
		{"JSON array with empty fields", ` [{"name":"f","taskPrefix":"p","on":["failed"],"window":"","threshold":null,
			"notify":[],"labels":{},"by":"","severity":null}]`, []*Rule{eventDefaults}},
		{"JSON every key", `[{"name":"etl.nightly-slow","taskPrefix":"批处理_\"x\"\\","window":"90m",
			"threshold":"pct_change(avg_cost) > 50% and count >= 10","duration":"1.5m","keep":"500ms",
			"notify":["feishu"],"severity":"critical","by":"name","labels":{"team":"data","runbook":"see wiki/etl","tier":"1"}},
			{"name":"any_failure","taskPrefix":"","on":["failed","timeout","manual_blocked"],"groupWindow":"30s",
			"notify":["wecom","slack.ops"],"severity":"info","labels":{"k":"v"}}]`, []*Rule{allRate, allEvent}},
		{"JSON empty", `{"rules": []}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse("rules.txt", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rules, want %d: %v", len(got), len(tt.want), got)
			}
			for i := range got {
				if d := diffRules(got[i], tt.want[i]); d != "" {
					t.Errorf("rule %d: %s", i, d)
				}
			}
		})
	}
}

func TestParsePositions(t *testing.T) {
	t.Parallel()
	src := "# header\nRULE a task_prefix: \"x\" ON: failed\n\n  RULE b task_prefix: \"y\" ON: failed"
	rs, err := Parse("f.rules", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Pos{{"f.rules", 2, 1}, {"f.rules", 4, 3}}
	for i, r := range rs {
		if r.Pos != want[i] {
			t.Errorf("rule %s at %v, want %v", r.Name, r.Pos, want[i])
		}
	}
	js := "[\n  {\"taskPrefix\": \"x\", \"on\": [\"failed\"]},\n  {\"taskPrefix\": \"y\", \"on\": [\"failed\"]}]"
	rs, err = Parse("f.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	want = []Pos{{"f.json", 2, 3}, {"f.json", 3, 3}}
	for i, r := range rs {
		if r.Pos != want[i] {
			t.Errorf("JSON rule %d at %v, want %v", i, r.Pos, want[i])
		}
	}
}

// TestGeneratedName: an unnamed rule is named after its canonical text,
// so reformatting keeps the name and a change of meaning changes it.
func TestGeneratedName(t *testing.T) {
	t.Parallel()
	parse := func(src string) *Rule {
		rs, err := Parse("", []byte(src))
		if err != nil || len(rs) != 1 {
			t.Fatalf("Parse(%q) = %v, %v", src, rs, err)
		}
		return rs[0]
	}
	a := parse(seed)
	if want := hashName(seedCanonical); a.Name != want {
		t.Errorf("name %s, want %s", a.Name, want)
	}
	if b := parse("RULE NOTIFY: dingtalk, email duration: 120s THRESHOLD: failed_rate>0.05 window: 300s task_prefix: \"batch_\" SEVERITY: warning"); b.Name != a.Name {
		t.Errorf("reformatted rule renamed: %s != %s", b.Name, a.Name)
	}
	if c := parse(strings.Replace(seed, "0.05", "0.06", 1)); c.Name == a.Name {
		t.Errorf("changed rule kept the name %s", c.Name)
	}
}

// badInputs are wrong rule files with the exact report each one gets.
var badInputs = []struct {
	name, src, want string
}{
	{"missing prefix", `RULE WINDOW: 5m THRESHOLD: failed_rate > 0.05`,
		`rules.txt:1:1: rule has no task_prefix (expected task_prefix: "..."); task_prefix "" matches every job`},
	{"unknown key", `RULE task_prefix: "a" WINDW: 5m THRESHOLD: failed_rate > 0.05`,
		`rules.txt:1:23: unknown key "WINDW" (expected a key); did you mean WINDOW?`},
	{"unknown key far from any", `RULE task_prefix: "a" COLOUR: red ON: failed`,
		`rules.txt:1:23: unknown key "COLOUR" (expected a key); keys are task_prefix, WINDOW, THRESHOLD, DURATION, KEEP, BY, ON, GROUP_WINDOW, SEVERITY, NOTIFY, LABELS`},
	{"rule name with a colon", `RULE myrule: task_prefix: "a" ON: failed`,
		`rules.txt:1:6: unknown key "myrule" (expected a key); a rule name has no colon: RULE myrule task_prefix: ...`},
	{"unknown metric with suggestion", "RULE task_prefix: \"a\"\n\n  THRESHOLD: count > 5 and fail_rate > 0.05",
		`rules.txt:3:28: unknown metric "fail_rate" (expected a metric); did you mean failed_rate?`},
	{"unknown metric without suggestion", `RULE task_prefix: "a" THRESHOLD: happiness < 1`,
		`rules.txt:1:34: unknown metric "happiness" (expected a metric); metrics are count, failed, timeout, success, started, late, failed_rate, timeout_rate, success_rate, late_rate, avg_cost, max_cost, min_cost, backlog, running, throughput, missed`},
	{"bad duration unit", `RULE task_prefix: "a" WINDOW: 5x THRESHOLD: failed_rate > 0.05`,
		`rules.txt:1:31: unknown unit "x" in 5x (expected ms, s, m or h)`},
	{"duration in days", `RULE task_prefix: "a" ON: failed GROUP_WINDOW: 1d`,
		`rules.txt:1:48: unknown unit "d" in 1d (expected ms, s, m or h); write 24h for a day`},
	{"duration in minutes spelled out", `RULE task_prefix: "a" WINDOW: 5min THRESHOLD: count > 1`,
		`rules.txt:1:31: unknown unit "min" in 5min (expected ms, s, m or h); write m for minutes`},
	{"duration without unit", `RULE task_prefix: "a" WINDOW: 5 THRESHOLD: count > 1`,
		`rules.txt:1:31: duration 5 has no unit (expected ms, s, m or h); write 5s or 5m`},
	{"duration too long", `RULE task_prefix: "a" THRESHOLD: count > 1 KEEP: 25h`,
		`rules.txt:1:50: duration 25h is too long (expected at most 24h)`},
	{"duration below a millisecond", `RULE task_prefix: "a" THRESHOLD: count > 1 KEEP: 0.5ms`,
		`rules.txt:1:50: duration 0.5ms is not a whole number of milliseconds; durations are counted in milliseconds`},
	{"malformed number", `RULE task_prefix: "a" THRESHOLD: count > 1 KEEP: 1.m`,
		`rules.txt:1:50: malformed number "1.m" (expected a number such as 5, 0.05, 5% or 1.5h)`},
	{"window not a multiple of 10s", `RULE task_prefix: "a" WINDOW: 15s THRESHOLD: failed_rate > 0.05`,
		`rules.txt:1:31: WINDOW 15s is not a multiple of 10s (expected 10s to 24h in steps of 10s); metrics are kept in 10-second buckets`},
	{"window too short", `RULE task_prefix: "a" WINDOW: 0s THRESHOLD: count > 1`,
		`rules.txt:1:31: WINDOW 0s is too short (expected 10s to 24h in steps of 10s); metrics are kept in 10-second buckets`},
	{"THRESHOLD and ON together", `RULE task_prefix: "a" THRESHOLD: failed_rate > 0.05 ON: failed`,
		`rules.txt:1:53: THRESHOLD and ON in one rule (expected exactly one of them); THRESHOLD makes a rate rule and ON an event rule; write two rules`},
	{"neither THRESHOLD nor ON", `RULE task_prefix: "a" NOTIFY: email`,
		`rules.txt:1:1: rule has neither THRESHOLD nor ON (expected one of them); THRESHOLD watches a rate, as in failed_rate > 5%; ON fires on events, as in failed, timeout`},
	{"WINDOW on an event rule", `RULE task_prefix: "a" ON: failed WINDOW: 5m`,
		`rules.txt:1:34: WINDOW only applies to THRESHOLD rules, and this rule has ON; an event rule groups matches with GROUP_WINDOW`},
	{"GROUP_WINDOW on a rate rule", `RULE task_prefix: "a" THRESHOLD: count > 1 GROUP_WINDOW: 5m`,
		`rules.txt:1:44: GROUP_WINDOW only applies to ON rules, and this rule has THRESHOLD; a rate rule uses WINDOW, DURATION and KEEP`},
	{"key given twice", "RULE task_prefix: \"a\" ON: failed\n  task_prefix: \"b\"",
		`rules.txt:2:3: task_prefix given twice in one rule; the first is at 1:6; keep one`},
	{"unterminated string", "RULE task_prefix: \"batch_ ON: failed\nRULE task_prefix: \"b\" ON: failed",
		`rules.txt:1:19: unterminated string (expected a closing "); a string ends on the line where it starts`},
	{"unknown escape", `RULE task_prefix: "a\tb" ON: failed`,
		`rules.txt:1:21: unknown escape in string (expected \" or \\)`},
	{"duplicate name", "RULE x task_prefix: \"a\" ON: failed\nRULE x task_prefix: \"b\" ON: failed",
		`rules.txt:2:1: duplicate rule name x (first at 1:1); give each rule its own name`},
	{"the same rule twice", "RULE task_prefix: \"a\" ON: failed\n\nRULE task_prefix: \"a\" ON: failed",
		`rules.txt:3:1: duplicate rule name ` + hashName(`RULE task_prefix: "a" ON: failed GROUP_WINDOW: 1m SEVERITY: warning`) + ` (first at 1:1); the two rules are the same; remove one`},
	{"trailing garbage", `RULE task_prefix: "a" ON: failed )`,
		`rules.txt:1:34: unexpected ")" (expected a KEY: or RULE)`},
	{"missing comma", `RULE task_prefix: "a" ON: failed NOTIFY: a b`,
		`rules.txt:1:44: unexpected "b" (expected a KEY: or RULE); a key ends with a colon, and list items are separated by commas`},
	{"text before the first rule", "task_prefix: \"a\"\nRULE task_prefix: \"a\" ON: failed",
		`rules.txt:1:1: unexpected "task_prefix" (expected RULE or INHIBIT); every rule starts with the word RULE, every inhibit rule with INHIBIT`},
	{"unknown status", `RULE task_prefix: "a" ON: faild`,
		`rules.txt:1:27: unknown status "faild" (expected pending, running, success, failed, timeout, manual_blocked); did you mean failed?`},
	{"status twice", `RULE task_prefix: "a" ON: failed, FAILED`,
		`rules.txt:1:35: status failed listed twice`},
	{"unknown severity", `RULE task_prefix: "a" ON: failed SEVERITY: critcal`,
		`rules.txt:1:44: unknown severity "critcal" (expected info, warning or critical); did you mean critical?`},
	{"BY something else", `RULE task_prefix: "a" THRESHOLD: count > 1 BY: tenant`,
		`rules.txt:1:48: BY "tenant" is not supported (expected name); BY: name evaluates each job name on its own`},
	{"channel twice", `RULE task_prefix: "a" ON: failed NOTIFY: email, email`,
		`rules.txt:1:49: channel email listed twice`},
	{"too many channels", `RULE task_prefix: "a" ON: failed NOTIFY: ` + chans(33),
		`rules.txt:1:192: too many channels (expected at most 32)`},
	{"label twice", `RULE task_prefix: "a" ON: failed LABELS: a=1, a=2`,
		`rules.txt:1:47: label a given twice`},
	{"label without value", `RULE task_prefix: "a" ON: failed LABELS: team= NOTIFY: x`,
		`rules.txt:1:48: unexpected "NOTIFY" (expected a label value: a word or a quoted string)`},
	{"empty list", `RULE task_prefix: "a" ON: SEVERITY: info`,
		`rules.txt:1:27: unexpected "SEVERITY" (expected a status)`},
	{"rate unit on a rate", `RULE task_prefix: "a" THRESHOLD: failed_rate > 30s`,
		`rules.txt:1:48: failed_rate cannot be compared with 30s (expected a fraction such as 0.05 or a percentage such as 5%); failed_rate is a fraction from 0 to 1`},
	{"percentage on a cost", `RULE task_prefix: "a" THRESHOLD: avg_cost > 5%`,
		`rules.txt:1:45: avg_cost cannot be compared with 5% (expected milliseconds or a duration such as 30s); avg_cost is in milliseconds`},
	{"duration on a count", `RULE task_prefix: "a" THRESHOLD: 1m < backlog`,
		`rules.txt:1:34: backlog cannot be compared with 1m (expected a plain number); backlog counts runs`},
	{"unit after a space", `RULE task_prefix: "a" THRESHOLD: failed_rate > 5 %`,
		`rules.txt:1:50: unexpected character '%'; write the unit right after the number, as in 5%`},
	{"full-width colon", `RULE task_prefix： "a" ON: failed`,
		`rules.txt:1:17: unexpected character '：'; use an ASCII colon :`},
	{"metric without comparison", `RULE task_prefix: "a" THRESHOLD: failed_rate NOTIFY: x`,
		`rules.txt:1:46: unexpected "NOTIFY" (expected a comparison: > >= < <= == !=); compare a metric with a number, as in failed_rate > 5%`},
	{"two metrics", `RULE task_prefix: "a" THRESHOLD: count > failed`,
		`rules.txt:1:42: comparison of two metrics (expected a number on one side); compare each metric with a number and join them with and/or`},
	{"two numbers", `RULE task_prefix: "a" THRESHOLD: 1 < 2`,
		`rules.txt:1:34: comparison of two numbers (expected a metric on one side)`},
	{"chained comparison", `RULE task_prefix: "a" THRESHOLD: count > 1 > 2`,
		`rules.txt:1:44: unexpected ">" (expected and, or, or the next KEY:)`},
	{"dangling and", `RULE task_prefix: "a" THRESHOLD: count > 1 and`,
		`rules.txt:1:47: unexpected end of input (expected a metric or a number)`},
	{"unclosed parenthesis", `RULE task_prefix: "a" THRESHOLD: (count > 1 DURATION: 1m`,
		`rules.txt:1:45: unexpected "DURATION" (expected ")")`},
	{"pct_change of nothing", `RULE task_prefix: "a" THRESHOLD: pct_change() > 1`,
		`rules.txt:1:45: unexpected ")" (expected a metric)`},
	{"too deep", `RULE task_prefix: "a" THRESHOLD: ` + strings.Repeat("(", 40) + "count > 1" + strings.Repeat(")", 40),
		`rules.txt:1:66: expression nested too deeply (expected at most 32 levels of parentheses and not)`},
	// Other JSON readers take the last of two keys; this one took both.
	{"JSON rules twice", `{"rules":[{"taskPrefix":"x","on":["failed"]}],"rules":[]}`,
		`rules.txt:1:47: rules given twice in the top-level object; the first is at 1:2; keep one, with every rule in it`},
	{"JSON inhibits twice", `{"inhibits":[],"rules":[],"inhibits":[]}`,
		`rules.txt:1:27: inhibits given twice in the top-level object; the first is at 1:2; keep one, with every rule in it`},
	{"JSON unknown field", "{\"rules\": [\n  {\"taskPrefix\": \"a\",\n   \"windw\": \"5m\", \"threshold\": \"count > 1\"}]}",
		`rules.txt:3:4: unknown field "windw" in rules[0] (expected a known field); did you mean window?`},
	{"JSON unknown top-level field", `{"rulez": []}`,
		`rules.txt:1:2: unknown field "rulez" in the top-level object (expected a known field); did you mean rules?`},
	{"JSON wrong type", "[\n {\"taskPrefix\":\"a\",\n  \"window\":5, \"threshold\": \"count > 1\"}]",
		`rules.txt:3:12: [0].window is number 5 (expected a string)`},
	{"JSON bad expression", "[\n {\"taskPrefix\":\"a\",\n  \"threshold\":\"fail_rate > 0.05\"}]",
		`rules.txt:3:16: [0].threshold: unknown metric "fail_rate" (expected a metric); did you mean failed_rate?`},
	{"JSON expression with escapes", "[{\"taskPrefix\":\"a\",\"threshold\":\"count \\u003e \\\"x\"}]",
		`rules.txt:1:32: [0].threshold: unterminated string (expected a closing "); a string ends on the line where it starts`},
	{"JSON both kinds", `[{"taskPrefix":"a","threshold":"count > 1","on":["failed"]}]`,
		`rules.txt:1:44: [0]: threshold and on in one rule (expected exactly one of them); threshold makes a rate rule and on an event rule; write two rules`},
	{"JSON missing prefix", `{"rules":[{"on":["failed"]}]}`,
		`rules.txt:1:11: rules[0]: rule has no taskPrefix (expected taskPrefix: "..."); taskPrefix "" matches every job`},
	{"JSON bad window", `[{"taskPrefix":"a","threshold":"count > 1","window":"15s"}]`,
		`rules.txt:1:53: [0].window: window 15s is not a multiple of 10s (expected 10s to 24h in steps of 10s); metrics are kept in 10-second buckets`},
	{"JSON control character", `[{"taskPrefix":"a\nb","on":["failed"]}]`,
		`rules.txt:1:16: [0].taskPrefix: taskPrefix "a\nb" holds control characters or invalid UTF-8 (expected printable text)`},
	{"JSON bad channel name", `[{"taskPrefix":"a","on":["failed"],"notify":["ops team"]}]`,
		`rules.txt:1:46: [0].notify: invalid channel name "ops team" (expected letters, digits, _ . - starting with a letter or _, not RULE or INHIBIT)`},
	{"JSON rule named RULE", `[{"name":"RULE","taskPrefix":"a","on":["failed"]}]`,
		`rules.txt:1:10: [0]: invalid rule name "RULE" (expected letters, digits, _ . - starting with a letter or _, not RULE or INHIBIT)`},
	{"JSON label named rule", `[{"taskPrefix":"a","on":["failed"],"labels":{"Rule":"x"}}]`,
		`rules.txt:1:46: [0].labels: invalid label name "Rule" (expected letters, digits, _ . - starting with a letter or _, not RULE or INHIBIT)`},
	{"channel named RULE after a trailing comma", "RULE task_prefix: \"a\" ON: failed NOTIFY: email,\nRULE task_prefix: \"b\" ON: failed",
		`rules.txt:2:1: unexpected "RULE" (expected a channel name)`},
	{"JSON syntax error", "[\n {\"taskPrefix\":\"a\",\n  \"window\":\"5m\",}]",
		`rules.txt:3:17: invalid JSON: invalid character '}' looking for beginning of object key string`},
	{"JSON trailing garbage", `[{"taskPrefix":"a","on":["failed"]}] x`,
		`rules.txt:1:38: invalid JSON: invalid character 'x' after top-level value`},
	{"JSON not a rule", `[1]`,
		`rules.txt:1:2: [0] is number 1 (expected a rule object {...})`},
	{"JSON rules not an array", `{"rules": {"taskPrefix": "a"}}`,
		`rules.txt:1:11: rules is an object (expected an array of rule objects)`},
	// A label rides on every notification of its rule and into the
	// channels' outboxes: a megabyte value made megabyte bodies that
	// receivers refuse. Values are held to what a silence can match.
	{"label value over 1 KiB", `RULE task_prefix: "a" ON: failed LABELS: runbook="` + strings.Repeat("x", 1025) + `"`,
		`rules.txt:1:42: the value of runbook is 1025 bytes (expected at most 1024, as a silence matches); put a link to the text in the label`},
	{"JSON label value over 1 KiB", `[{"taskPrefix":"a","on":["failed"],"labels":{"team":"` + strings.Repeat("é", 600) + `"}}]`,
		`rules.txt:1:46: [0].labels: the value of team is 1200 bytes (expected at most 1024, as a silence matches); put a link to the text in the label`},
	{"inhibit value over 1 KiB", `INHIBIT SOURCE: team="` + strings.Repeat("x", 2000) + `" TARGET: rule=b EQUAL: group`,
		`rules.txt:1:17: the value of team is 2000 bytes (expected at most 1024, as a silence matches); put a link to the text in the label`},
}

func TestParseBad(t *testing.T) {
	t.Parallel()
	for _, tt := range badInputs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs, err := Parse("rules.txt", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %v", rs)
			}
			if rs != nil {
				t.Errorf("Parse returned rules with an error: %v", rs)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}

// TestErrorsOrderAndLimit: every problem in the file is reported, in file
// order, up to 20.
func TestErrorsOrderAndLimit(t *testing.T) {
	t.Parallel()
	src := "RULE task_prefix: \"a\" WINDOW: 5x THRESHOLD: fail_rate > 1\nRULE ON: failed\nRULE task_prefix: \"\" ON: faild\n"
	_, err := Parse("r", []byte(src))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T, want ErrorList", err)
	}
	want := []string{
		`r:1:31: unknown unit "x" in 5x (expected ms, s, m or h)`,
		`r:1:45: unknown metric "fail_rate" (expected a metric); did you mean failed_rate?`,
		`r:2:1: rule has no task_prefix (expected task_prefix: "..."); task_prefix "" matches every job`,
		`r:3:26: unknown status "faild" (expected pending, running, success, failed, timeout, manual_blocked); did you mean failed?`,
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}

	_, err = Parse("r", []byte(strings.Repeat("RULE task_prefix: \"a\" ON: nope\n", 50)))
	if !errors.As(err, &list) || len(list) != maxErrors {
		t.Fatalf("got %d errors, want %d", len(list), maxErrors)
	}
	if list[maxErrors-1].Pos.Line != maxErrors {
		t.Errorf("last error on line %d, want %d", list[maxErrors-1].Pos.Line, maxErrors)
	}
}

// TestErrorIsInvalidInput: rule errors reach users as bad input, through
// the root package's error codes.
func TestErrorIsInvalidInput(t *testing.T) {
	t.Parallel()
	_, err := Parse("r.txt", []byte(`RULE task_prefix: "a" ON: faild`))
	if code := apollo.ErrorCode(err); code != apollo.EINVALID {
		t.Errorf("ErrorCode = %q, want %q", code, apollo.EINVALID)
	}
	var ae *apollo.Error
	if !errors.As(err, &ae) || ae.Field != "r.txt:1:27" || !strings.Contains(ae.Message, `unknown status "faild"`) || ae.Hint != "did you mean failed?" {
		t.Errorf("apollo.Error = %+v", ae)
	}
	var re *Error
	if !errors.As(err, &re) || re.Pos != (Pos{"r.txt", 1, 27}) {
		t.Errorf("rules.Error = %+v", re)
	}
}

func TestCheckChannels(t *testing.T) {
	t.Parallel()
	rs, err := Parse("r.txt", []byte("RULE a task_prefix: \"\" ON: failed NOTIFY: email, dingtalk\nRULE b task_prefix: \"\" ON: failed\n  NOTIFY: dingtak, email, pager"))
	if err != nil {
		t.Fatal(err)
	}
	known := func(n string) bool { return n == "email" || n == "dingtalk" }
	err = CheckChannels(rs, known)
	want := `r.txt:3:11: rule b notifies unknown channel "dingtak" (expected a channel from the configuration); configure a channel with this name, or fix the spelling` + "\n" +
		`r.txt:3:27: rule b notifies unknown channel "pager" (expected a channel from the configuration); configure a channel with this name, or fix the spelling`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	if err := CheckChannels(rs[:1], known); err != nil {
		t.Errorf("known channels: %v", err)
	}
	// A rule built in code has no positions; the error still names it.
	err = CheckChannels([]*Rule{{Name: "c", Notify: []string{"x"}}}, known)
	if err == nil || !strings.HasPrefix(err.Error(), `rule c notifies unknown channel "x"`) {
		t.Errorf("got %v", err)
	}
}

func TestMatchesAndKind(t *testing.T) {
	t.Parallel()
	rs, err := Parse("", []byte(`RULE a task_prefix: "batch_" ON: failed RULE b task_prefix: "" THRESHOLD: count == 0`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := rs[0], rs[1]
	for _, c := range []struct {
		r    *Rule
		job  string
		want bool
	}{{a, "batch_daily", true}, {a, "batch_", true}, {a, "batch", false}, {a, "etl_batch_x", false}, {b, "", true}, {b, "anything", true}} {
		if got := c.r.Matches(c.job); got != c.want {
			t.Errorf("%s.Matches(%q) = %v, want %v", c.r.Name, c.job, got, c.want)
		}
	}
	if !a.IsEvent() || b.IsEvent() {
		t.Errorf("IsEvent: a=%v b=%v, want true false", a.IsEvent(), b.IsEvent())
	}
}

func chans(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	return strings.Join(names, ", ")
}

// Text saved before the label bound (rules.MaxLabelValueBytes) still
// parses through ParseSaved, with everything else checked as before.
func TestParseSavedKeepsLongLabels(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxLabelValueBytes+1)
	src := "RULE a task_prefix: \"a\" ON: failed LABELS: runbook=\"" + long + "\"\nINHIBIT SOURCE: team=\"" + long + "\" TARGET: rule=a EQUAL: group\n"
	if _, err := ParseFile("r", []byte(src)); err == nil {
		t.Fatal("ParseFile took a label over the bound")
	}
	f, err := ParseSaved("r", []byte(src))
	if err != nil {
		t.Fatalf("ParseSaved: %v", err)
	}
	if len(f.Rules) != 1 || f.Rules[0].Labels["runbook"] != long || len(f.Inhibits) != 1 {
		t.Fatalf("ParseSaved gave %d rules (runbook of %d bytes), %d inhibits", len(f.Rules), len(f.Rules[0].Labels["runbook"]), len(f.Inhibits))
	}
	if _, err := ParseSaved("r", []byte("RULE a task_prefix: \"a\" ON: faild\n")); err == nil {
		t.Error("ParseSaved took a rule with an unknown status")
	}
}
