package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/rulebook"
)

func TestRulesCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.rules", `RULE task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m NOTIFY: dingtalk, email
RULE etl_failed task_prefix: "etl_" ON: failed, timeout NOTIFY: dingtalk
`)
	bad := write("bad.rules", `RULE slow task_prefix: "etl_" WINDOW: 15s
  THRESHOLD: pct_change(avg_cost) > 50% and fail_rate > 1%
RULE task_prefix: "batch_" ON: failed, timout
`)
	cfg := write("apollo.yaml", "channels:\n  dingtalk:\n    type: dingtalk\n    url: ${DING_URL_NOT_SET}\n")
	// A day over the day before needs two days of metrics.
	daily := write("daily.rules", `RULE daily task_prefix: "" WINDOW: 24h THRESHOLD: pct_change(count) < -50%
`)
	twoDays := write("two-days.yaml", "retention:\n  rollups: 48h\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"good", []string{good}, 0, "ok: 2 rules (1 rate, 1 event)\n"},
		{"bad", []string{bad}, 1, bad + `:1:39: WINDOW 15s is not a multiple of 10s (expected 10s to 24h in steps of 10s); metrics are kept in 10-second buckets
` + bad + `:2:45: unknown metric "fail_rate" (expected a metric); did you mean failed_rate?
` + bad + `:3:40: unknown status "timout" (expected pending, running, success, failed, timeout, manual_blocked); did you mean timeout?
`},
		{"channels", []string{"--channels", "dingtalk,email", good}, 0, "ok: 2 rules (1 rate, 1 event)\n"},
		{"unknown channel", []string{"--channels", "dingtalk", good}, 1,
			good + ":1:100: rule rule_6423e71a notifies unknown channel \"email\" (expected a channel from the configuration); configure a channel with this name, or fix the spelling\n"},
		{"config", []string{"--config", cfg, good}, 1, "unknown channel \"email\""},
		{"reach", []string{daily}, 1, daily + ":1:36: rule daily: WINDOW 24h with pct_change, which compares it with the 24h before it, reads 48h back, " +
			"but the metrics are kept 24h (expected a WINDOW of at most 12h); shorten the WINDOW, or keep the metrics longer (retention.rollups in the configuration)\n"},
		{"reach kept", []string{"--config", twoDays, daily}, 0, "ok: 1 rule (1 rate, 0 event)\n"},
		{"two files", []string{good, filepath.Join(dir, "missing")}, 1,
			good + ": ok: 2 rules (1 rate, 1 event)\n" + filepath.Join(dir, "missing") + ": cannot read: no such file or directory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"rules", "check"}, tc.args...), nil, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errOut.String())
			}
			if tc.name == "config" {
				if !strings.Contains(out.String(), tc.out) {
					t.Fatalf("output %q lacks %q", out.String(), tc.out)
				}
				return
			}
			if out.String() != tc.out {
				t.Fatalf("output\n%s\nwant\n%s", out.String(), tc.out)
			}
			if code == 1 && !strings.Contains(errOut.String(), "problem(s) found") {
				t.Errorf("stderr %q", errOut.String())
			}
		})
	}
}

// A rules file of more rules than a tenant may have (rulebook.MaxRules,
// rate, event and inhibit rules together) is a problem for rules check,
// with its count and the limit: before, check said ok and the server then
// refused the same file with 413 at apply. At the limit it is ok.
func TestRulesCheckCountsTheLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name string, rules, inhibits int) string {
		var b strings.Builder
		for i := range rules {
			fmt.Fprintf(&b, "RULE r%d task_prefix: \"job%d_\" ON: failed\n", i, i)
		}
		for i := range inhibits {
			fmt.Fprintf(&b, "INHIBIT i%d SOURCE: rule=r0 TARGET: rule=r%d\n", i, i+1)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	at := file("at.rules", rulebook.MaxRules-1, 1)
	over := file("over.rules", rulebook.MaxRules-1, 2)
	for _, tc := range []struct {
		name string
		file string
		code int
		out  string
	}{
		{"at the limit", at, 0, fmt.Sprintf("ok: %d rules (0 rate, %d event), 1 inhibit rule\n", rulebook.MaxRules-1, rulebook.MaxRules-1)},
		{"over the limit", over, 1, fmt.Sprintf("%s: %d rules (rate, event and inhibit rules together), over the limit of %d a tenant may have: "+
			"the server refuses the file (apollo rules apply, PUT /api/v1/rules: 413); a rule's task_prefix covers every job whose name starts with it: "+
			"fold the rules that differ only by job into one with a shorter prefix\n", over, rulebook.MaxRules+1, rulebook.MaxRules)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"rules", "check", tc.file}, nil, &out, &errOut)
			if code != tc.code || out.String() != tc.out {
				t.Fatalf("exit %d, want %d\noutput %q\nwant   %q\n%s", code, tc.code, out.String(), tc.out, errOut.String())
			}
		})
	}
}
