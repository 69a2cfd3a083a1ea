package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// randRule builds a valid rule directly, not through the parser, with the
// awkward characters a text form must survive: quotes, backslashes, #,
// colons, spaces and Chinese in strings.
func randRule(r *rand.Rand, i int) *Rule {
	ident := func() string {
		parts := []string{"batch", "etl", "nightly", "ops", "x1", "_a", "data-eng", "v2.1", "rules"}
		return parts[r.IntN(len(parts))] + strings.Repeat("_b", r.IntN(2))
	}
	text := func() string {
		chars := []string{"a", "Z", "_", " ", `"`, `\`, "#", ":", ",", "批", "处理", "é", "=", "{", "0"}
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(chars[r.IntN(len(chars))])
		}
		return b.String()
	}
	ms := func(limit time.Duration) time.Duration {
		return time.Duration(r.Int64N(int64(limit/time.Millisecond)+1)) * time.Millisecond
	}
	rule := &Rule{Prefix: text(), Severity: []apollo.Severity{apollo.SeverityInfo, apollo.SeverityWarning, apollo.SeverityCritical}[r.IntN(3)]}
	if r.IntN(3) > 0 {
		rule.Name = fmt.Sprintf("%s.%d", ident(), i)
	}
	if r.IntN(2) == 0 {
		rule.Window = time.Duration(1+r.IntN(8640)) * 10 * time.Second
		x, err := ParseExpr(randExpr(r, 3))
		if err != nil {
			panic(err)
		}
		rule.Expr = x
		if r.IntN(2) == 0 {
			rule.Duration = ms(maxDuration)
		}
		if r.IntN(2) == 0 {
			rule.Keep = []time.Duration{0, 90 * time.Minute, ms(time.Hour)}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			rule.By = "name"
		}
	} else {
		rule.GroupWindow = time.Second + ms(maxDuration-time.Second)
		for _, i := range r.Perm(6)[:r.IntN(7)] {
			rule.On = append(rule.On, apollo.Statuses()[i])
		}
		for _, i := range r.Perm(4)[:r.IntN(5)] {
			rule.Occurrences = append(rule.Occurrences, Occurrences()[i])
		}
		if len(rule.On)+len(rule.Occurrences) == 0 {
			rule.Occurrences = []Occurrence{OccurrenceMissed}
		}
	}
	for j := range r.IntN(3) {
		rule.Notify = append(rule.Notify, fmt.Sprintf("%s%d", ident(), j))
	}
	for range r.IntN(4) {
		if rule.Labels == nil {
			rule.Labels = map[string]string{}
		}
		rule.Labels[ident()] = text()
	}
	if rule.Name == "" {
		rule.Name = generatedName(rule)
	}
	return rule
}

func parseOne(t testing.TB, src string) *Rule {
	t.Helper()
	rs, err := Parse("", []byte(src))
	if err != nil || len(rs) != 1 {
		t.Fatalf("Parse(%s) = %d rules, %v", src, len(rs), err)
	}
	return rs[0]
}

// checkRoundTrip: text -> Rule -> JSON -> Rule -> text -> Rule, and JSON
// through encoding/json, all give the rule we started with.
func checkRoundTrip(t testing.TB, want *Rule) {
	t.Helper()
	fromText := parseOne(t, want.String())
	if d := diffRules(want, fromText); d != "" {
		t.Fatalf("text round trip: %s", d)
	}
	js, err := fromText.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	fromJSON := parseOne(t, "["+string(js)+"]")
	if d := diffRules(want, fromJSON); d != "" {
		t.Fatalf("JSON round trip of %s: %s", js, d)
	}
	if d := diffRules(want, parseOne(t, fromJSON.String())); d != "" {
		t.Fatalf("text after JSON: %s", d)
	}
	var viaStd Rule
	if err := json.Unmarshal(js, &viaStd); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", js, err)
	}
	if d := diffRules(want, &viaStd); d != "" {
		t.Fatalf("encoding/json round trip: %s", d)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	var file strings.Builder
	var all []*Rule
	for i := range 1000 {
		rule := randRule(r, i)
		checkRoundTrip(t, rule)
		all = append(all, rule)
		fmt.Fprintf(&file, "%s\n", rule)
	}
	// The same rules as one file in each form. Their random windows are
	// far more than a new file may have (MaxWindows): read as a saved
	// file, which is not held to that bound.
	parse := func(name string, src []byte) ([]*Rule, error) {
		f, err := ParseSaved(name, src)
		if err != nil {
			return nil, err
		}
		return f.Rules, nil
	}
	got, err := parse("all.rules", []byte(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(map[string]any{"rules": all})
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, err := parse("all.json", js)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) || len(gotJSON) != len(all) {
		t.Fatalf("got %d and %d rules, want %d", len(got), len(gotJSON), len(all))
	}
	for i := range all {
		if d := diffRules(all[i], got[i]); d != "" {
			t.Fatalf("text file, rule %d: %s", i, d)
		}
		if d := diffRules(all[i], gotJSON[i]); d != "" {
			t.Fatalf("JSON file, rule %d: %s", i, d)
		}
	}
}

func TestMarshalJSON(t *testing.T) {
	t.Parallel()
	rs, err := Parse("", []byte(seed+"\nRULE f task_prefix: \"p\" ON: failed, timeout LABELS: team=data"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"name":"` + hashName(seedCanonical) + `","taskPrefix":"batch_","window":"5m","threshold":"failed_rate > 0.05","duration":"2m","keep":"0s","severity":"warning","notify":["dingtalk","email"]}`,
		`{"name":"f","taskPrefix":"p","on":["failed","timeout"],"groupWindow":"1m","severity":"warning","labels":{"team":"data"}}`,
	}
	for i, r := range rs {
		got, err := r.MarshalJSON()
		if err != nil || string(got) != want[i] {
			t.Errorf("MarshalJSON\n got: %s %v\nwant: %s", got, err, want[i])
		}
	}
	var r Rule
	err = json.Unmarshal([]byte(`{"taskPrefix": "a", "on": ["failed"], "colour": "red"}`), &r)
	var list ErrorList
	if !errors.As(err, &list) || err.Error() != `1:39: unknown field "colour" in the rule (expected a known field); fields are name, taskPrefix, window, threshold, duration, keep, by, on, groupWindow, severity, notify, labels` {
		t.Errorf("json.Unmarshal with an unknown field: %v", err)
	}
}

// addSeeds gives f the rules files the fuzz tests of ParseFile start from.
func addSeeds(f *testing.F) {
	for _, s := range []string{
		seed,
		"# c\nrule a task_prefix: \"x\\\"y\" window: 1.5h threshold: not (pct_change(avg_cost) > 50% or 5 < count) and late_rate >= 1%\n keep: 500ms by: name labels: a=b, c=\"d e\" severity: critical",
		`RULE e task_prefix: "" ON: failed, timeout GROUP_WINDOW: 30s NOTIFY: wecom, slack.ops`,
		`{"rules":[{"name":"n","taskPrefix":"批处理_","window":"5m","threshold":"failed_rate > 0.05","duration":"2m","keep":"0s","notify":["dingtalk","email"],"severity":"critical","by":"name","labels":{"team":"data"}}]}`,
		`[{"taskPrefix":"a","on":["failed","timeout"],"groupWindow":"1m"}]`,
		`RULE task_prefix: "a THRESHOLD: fail_rate > 5x`,
		`RULE task_prefix： "a" ON: faild )`,
		"[\n {\"taskPrefix\":\"a\",\n  \"window\":\"5m\",}]",
		"RULE " + strings.Repeat("(", 50),
		// Control characters and bytes that are not UTF-8, in and out of
		// strings, in both forms.
		"RULE a\x1b b\n", "\n\n  \x01", "# caf\xe9\nRULE a task_prefix: \"\xff\" ON: failed\n",
		"RULE a task_prefix: \"x\x00\" ON: failed\r\n", "{\"rules\":[\x1b]}", "{\"rules\":[{\"taskPrefix\":\"\xff\",\"on\":[\"failed\"]}]}",
	} {
		f.Add([]byte(s))
	}
	for _, bad := range badInputs {
		f.Add([]byte(bad.src))
	}
	for _, bad := range badInhibits {
		f.Add([]byte(bad.src))
	}
	for _, s := range goodInhibits {
		f.Add([]byte(s))
	}
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := ParseFile("fuzz", src)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || len(list) > maxErrors || file != nil {
				t.Fatalf("bad failure: %v, %T %v", file, err, err)
			}
			for _, e := range list {
				if !e.Pos.IsValid() || e.Pos.Col < 1 || e.Msg == "" {
					t.Fatalf("error without a place or a message: %+v", e)
				}
			}
			return
		}
		v := &arrayValues{}
		for _, r := range file.Rules {
			checkRoundTrip(t, r)
			r.Expr.Eval(v)
			r.Expr.Observe(v)
		}
		for _, in := range file.Inhibits {
			checkInhibitRoundTrip(t, in)
		}
	})
}

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{
		"failed_rate > 0.05", "pct_change(avg_cost) > 50% and count >= 10", "not (a > 1 or 5 < count)",
		"count == 0", "avg_cost > 1.5h or max_cost >= 500ms", "NOT not Count != -1", "((((x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := ParseExpr(s)
		if err != nil {
			return
		}
		y, err := ParseExpr(x.String())
		if err != nil || y.String() != x.String() {
			t.Fatalf("%q: canonical %q re-parses to %v, %v", s, x.String(), y, err)
		}
		for _, v := range []mapValues{
			{cur: map[Metric]float64{}, prev: map[Metric]float64{}},
			{cur: map[Metric]float64{MetricCount: 10, MetricAvgCost: 40000, MetricFailedRate: 0.07}, prev: map[Metric]float64{MetricAvgCost: 20000}},
		} {
			if x.Eval(v) != evalTree(x.root, v) || x.Eval(v) != y.Eval(v) {
				t.Fatalf("%q: compiled, tree and re-parse disagree", s)
			}
		}
	})
}

// FuzzParseSaved: what ParseFile accepts (a PUT), ParseSaved (the next
// start, another process) reads as the same rules; what ParseSaved
// accepts, its rules' canonical texts read back the same; it never
// panics, and every problem has a place.
func FuzzParseSaved(f *testing.F) {
	addSeeds(f)
	f.Add([]byte("RULE a task_prefix: \"x\" ON: failed LABELS: k=\"" + strings.Repeat("v", MaxLabelValueBytes+1) + "\"\n"))
	f.Add([]byte("RULE a task_prefix: \"x\" WINDOW: 24h THRESHOLD: pct_change(count) > 5%\n"))
	f.Add([]byte(`{"rules":[{"taskPrefix":"x","on":["failed"]}],"rules":[{"taskPrefix":"y","on":["failed"]}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		put, perr := ParseFile("put", src)
		saved, err := ParseSaved("saved", src)
		if err != nil {
			if perr == nil {
				t.Fatalf("accepted at a PUT, refused at the next start: %v", err)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || saved != nil {
				t.Fatalf("bad failure: %v, %T %v", saved, err, err)
			}
			for _, e := range list {
				if !e.Pos.IsValid() || e.Pos.Col < 1 || e.Msg == "" {
					t.Fatalf("error without a place or a message: %+v", e)
				}
			}
			return
		}
		if perr == nil {
			if len(put.Rules) != len(saved.Rules) || len(put.Inhibits) != len(saved.Inhibits) {
				t.Fatalf("a PUT read %d rules and %d inhibit rules, the next start %d and %d", len(put.Rules), len(put.Inhibits), len(saved.Rules), len(saved.Inhibits))
			}
			for i, r := range put.Rules {
				if d := diffRules(r, saved.Rules[i]); d != "" {
					t.Fatalf("a PUT and the next start read rule %d apart: %s", i, d)
				}
			}
		}
		for _, r := range saved.Rules {
			back, err := ParseSaved("canonical", []byte(r.String()))
			if err != nil || len(back.Rules) != 1 {
				t.Fatalf("the canonical text %q of a saved rule: %v", r.String(), err)
			}
			if d := diffRules(r, back.Rules[0]); d != "" {
				t.Fatalf("the canonical text of a saved rule: %s", d)
			}
		}
		for _, in := range saved.Inhibits {
			back, err := ParseSaved("canonical", []byte(in.String()))
			if err != nil || len(back.Inhibits) != 1 || back.Inhibits[0].String() != in.String() {
				t.Fatalf("the canonical text %q of a saved inhibit rule: %v", in.String(), err)
			}
		}
	})
}

// FuzzUnmarshalJSON: a rule or an inhibit rule read with encoding/json
// (Rule.UnmarshalJSON, Inhibit.UnmarshalJSON) never panics, and what it
// accepts survives its text and JSON forms.
func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"n","taskPrefix":"批处理_","window":"5m","threshold":"failed_rate > 0.05","duration":"2m","notify":["dingtalk"],"labels":{"team":"data"}}`,
		`{"taskPrefix":"a","on":["failed","timeout"],"groupWindow":"1m"}`,
		`{"taskPrefix":"a","window":1e400}`, `{"taskPrefix":"\ud800","on":["failed"]}`, `{"taskPrefix":"a","taskPrefix":"b"}`,
		`{"name":"i","source":["rule=a"],"target":["severity!=critical"],"equal":["team"]}`, `[`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if string(bytes.TrimSpace(b)) == "null" {
			return // a no-op, as encoding/json has it: no rule to check
		}
		var r Rule
		if err := json.Unmarshal(b, &r); err == nil {
			checkRoundTrip(t, &r)
		}
		var in Inhibit
		if err := json.Unmarshal(b, &in); err == nil {
			checkInhibitRoundTrip(t, &in)
		}
	})
}
