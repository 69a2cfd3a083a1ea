package rules

import (
	"errors"
	"strings"
	"testing"
)

// A problem with a long name, string or word quotes the start of it and
// says how long it is, in either form: before, each problem quoted it
// whole, and a 1 MB rule name came back in a 1 MB answer, and in a
// log line as long when the rules file was refused on reload.
func TestLongTextIsShortInProblems(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", 1<<20)
	ctl := strings.Repeat("x", 1<<20) + "\x01"
	for _, tc := range []struct{ name, src string }{
		{"rule name", "RULE " + long + "- task_prefix: \"x\" ON: failed\n"},
		{"channel", "RULE a task_prefix: \"x\" ON: failed NOTIFY: " + long + "-\n"},
		{"label name", "RULE a task_prefix: \"x\" ON: failed LABELS: " + long + "-=v\n"},
		{"severity", "RULE a task_prefix: \"x\" ON: failed SEVERITY: " + long + "\n"},
		{"by", "RULE a task_prefix: \"x\" WINDOW: 1m THRESHOLD: count > 1 BY: " + long + "\n"},
		{"status", "RULE a task_prefix: \"x\" ON: " + long + "\n"},
		{"key", "RULE a " + long + ": 1\n"},
		{"metric", "RULE a task_prefix: \"x\" WINDOW: 1m THRESHOLD: " + long + " > 1\n"},
		{"unit", "RULE a task_prefix: \"x\" WINDOW: 1" + long + "\n"},
		{"number", "RULE a task_prefix: \"x\" WINDOW: 1m THRESHOLD: count > 1." + strings.Repeat("1.", 1<<19) + "\n"},
		{"label value", "RULE a task_prefix: \"x\" ON: failed LABELS: k=\"" + ctl + "\"\n"},
		{"token", "RULE a task_prefix: \"x\" ON: failed " + "\"" + long + "\"\n"},
		{"inhibit rule", "INHIBIT i SOURCE: rule=" + long + "- TARGET: rule=b\n"},
		{"inhibit label", "INHIBIT i SOURCE: " + long + "-=a TARGET: rule=b\n"},
		{"inhibit severity", "INHIBIT i SOURCE: severity=" + long + " TARGET: rule=b\n"},
		{"inhibit equal", "INHIBIT i SOURCE: rule=a TARGET: rule=b EQUAL: " + long + "-\n"},
		{"json field", `{"rules":[{"` + long + `":1}]}`},
		{"json value", `{"rules":[{"taskPrefix":"x","on":["` + long + `"]}]}`},
		{"json type", `{"rules":[{"taskPrefix":"x","window":["` + long + `"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile("f", []byte(tc.src))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("ParseFile = %v, want problems", err)
			}
			for _, e := range list {
				if msg := e.Error(); len(msg) > 1024 {
					t.Errorf("a problem of %d bytes: %.200s...", len(msg), msg)
				}
			}
		})
	}
	// A name past its bound says how long it is.
	_, err := ParseFile("f", []byte("RULE "+long+" task_prefix: \"x\" ON: failed\n"))
	if err == nil || !strings.Contains(err.Error(), "(1048576 bytes)") {
		t.Errorf("a rule name of 1 MiB: %.300v", err)
	}
}

// A JSON text saved before the top-level keys were checked for
// duplicates still loads, as it ran: both arrays' rules.
func TestSavedJSONWithTwoRulesKeysStillLoads(t *testing.T) {
	t.Parallel()
	src := []byte(`{"rules":[{"name":"a","taskPrefix":"x","on":["failed"]}],"rules":[{"name":"b","taskPrefix":"y","on":["failed"]}]}`)
	f, err := ParseSaved("saved", src)
	if err != nil || len(f.Rules) != 2 {
		t.Fatalf("ParseSaved = %v, %v; want both rules", f, err)
	}
	if _, err := ParseFile("put", src); err == nil {
		t.Fatal("ParseFile accepted two rules keys")
	}
}
