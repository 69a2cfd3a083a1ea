package alert

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// BenchmarkApplyInhibit: one event rule's match (Apply) in a tenant with
// 1000 firing alerts, without inhibit rules, with one whose TARGET does
// not match the rule (the cost every tenant with inhibit rules pays), and
// with one that holds the match (the firing alerts are read per match).
func BenchmarkApplyInhibit(b *testing.B) {
	var base strings.Builder
	base.WriteString("RULE reports task_prefix: \"report_\" ON: failed NOTIFY: ops\n")
	for i := range 1000 {
		fmt.Fprintf(&base, "RULE other_%d task_prefix: \"other_%d_\" ON: failed NOTIFY: ops\n", i, i)
	}
	for _, bc := range []struct{ name, inhibit string }{
		{"none", ""},
		{"target-not-matched", "INHIBIT SOURCE: rule=other_0 TARGET: rule=nothing\n"},
		{"held", "INHIBIT SOURCE: rule=other_999 TARGET: rule=reports\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			src := []byte(bc.inhibit + base.String())
			clock := apollo.NewFakeClock(benchNow)
			e, err := New(Options{Store: benchStore(), Sender: discard{}, Clock: clock, QueueLen: 2000,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			rs, err := rules.Parse("bench.rules", src)
			if err != nil {
				b.Fatal(err)
			}
			e.SetRulesSource("", rs, src)
			change := func(job string) *apollo.Change {
				return &apollo.Change{Prev: apollo.Before{Status: apollo.StatusRunning},
					Task: apollo.Task{TaskID: job, Name: job, Status: apollo.StatusFailed}, Record: apollo.Record{Event: apollo.Event{Ts: 1}}}
			}
			for i := range 1000 {
				e.Apply(change(fmt.Sprintf("other_%d_job", i)))
			}
			c := change("report_daily")
			e.Apply(c)
			if n := len(e.Alerts("", apollo.AlertFiring)); n != 1001 {
				b.Fatalf("%d firing alerts", n)
			}
			b.ReportAllocs()
			for b.Loop() {
				e.Apply(c)
			}
		})
	}
}
