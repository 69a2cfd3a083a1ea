package alert_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/rules"
)

// inhibitSrc has a cause (the warehouse load) and two rules that fire on
// its echoes (the reports), and an INHIBIT rule that says so. The cause
// comes last: all three start firing in one evaluation, and the cause's
// rule must be evaluated first for its echoes to be held.
const inhibitSrc = `INHIBIT warehouse_down SOURCE: rule=warehouse_load_failed TARGET: task_prefix="report_"
RULE reports_failing task_prefix: "report_" WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: ops
RULE report_failing task_prefix: "report_" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: ops
RULE warehouse_load_failed task_prefix: "warehouse_" WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: ops
`

// While the source of an INHIBIT rule fires, the alerts of the two
// target rules fire too but are held: marked "inhibited by" the source's
// rule, not notified; the one notification is the source's. When the
// source resolves, the targets still firing are told. Tenant acme has
// the same rules without the INHIBIT rule and is told at once.
func TestInhibitRuleHoldsTargets(t *testing.T) {
	t.Parallel()
	tb := newTable()
	tb.set("warehouse_load", failing(1, 1))
	tb.set("report_daily", failing(1, 1))
	f := newFixture(t, "", tb, nil)
	f.eng.SetRulesSource("", parse(t, inhibitSrc), []byte(inhibitSrc))
	other := inhibitSrc[strings.Index(inhibitSrc, "\n")+1:]
	f.eng.SetRulesSource("acme", parse(t, other), []byte(other))

	f.eval(10 * time.Second)
	var told []string
	for _, n := range f.sent() {
		if n.Kind != firing || len(n.Alert.InhibitedBy) != 0 {
			t.Fatalf("sent %+v", n)
		}
		told = append(told, n.Alert.Tenant+"/"+n.Alert.Rule)
	}
	slices.Sort(told)
	if want := []string{"/warehouse_load_failed", "acme/report_failing", "acme/reports_failing", "acme/warehouse_load_failed"}; !slices.Equal(told, want) {
		t.Fatalf("told %v, want %v (the default tenant's source only)", told, want)
	}
	held := 0
	for _, a := range f.eng.Alerts("", apollo.AlertFiring) {
		switch {
		case a.Rule == "warehouse_load_failed":
			if len(a.InhibitedBy) != 0 {
				t.Fatalf("the source is held: %+v", a)
			}
		case slices.Equal(a.InhibitedBy, []string{"warehouse_load_failed"}):
			held++
		default:
			t.Fatalf("a target not marked inhibited by the source: %+v", a)
		}
	}
	if held != 2 {
		t.Fatalf("%d held alerts, want the two targets'", held)
	}
	f.eval(10 * time.Second)
	f.expectSent() // still held, no retry

	tb.remove("warehouse_load")
	f.eval(10 * time.Second)
	told = nil
	for _, n := range f.sent() {
		if n.Alert.Tenant == "acme" {
			continue // its source resolves too (the store is shared)
		}
		if n.Kind == firing && len(n.Alert.InhibitedBy) != 0 {
			t.Fatalf("released %+v", n)
		}
		told = append(told, string(n.Kind)+" "+n.Alert.Rule)
	}
	slices.Sort(told)
	if want := []string{"firing report_failing", "firing reports_failing", "resolved warehouse_load_failed"}; !slices.Equal(told, want) {
		t.Fatalf("after the source resolved, told %v, want %v", told, want)
	}
	for _, a := range f.eng.Alerts("", apollo.AlertFiring) {
		if len(a.InhibitedBy) != 0 {
			t.Fatalf("still marked after the source resolved: %+v", a)
		}
	}
}

// An event rule's match is held by a firing source as a rate alert is:
// it goes to a group of its own, marked and not notified; after the
// source resolved, the next match is told.
func TestInhibitRuleHoldsEventMatches(t *testing.T) {
	t.Parallel()
	const src = `INHIBIT SOURCE: rule=warehouse_failed TARGET: rule=reports_failed
RULE warehouse_failed task_prefix: "warehouse_" ON: failed GROUP_WINDOW: 1m NOTIFY: ops
RULE reports_failed task_prefix: "report_" ON: failed GROUP_WINDOW: 1m NOTIFY: ops
`
	f := newFixture(t, "", newTable(), nil)
	f.eng.SetRulesSource("", parse(t, src), []byte(src))
	changes, cancel := f.eng.Subscribe()
	defer cancel()
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	apply := func(job string) {
		c := finish(nil, "", job, job+"-"+f.clock.Now().String(), apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
		f.eng.Apply(&c)
	}
	apply("warehouse_load")
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Rule != "warehouse_failed" {
		t.Fatalf("%+v", n)
	}
	apply("report_daily")
	var held apollo.Alert
	for _, a := range f.eng.Alerts("", apollo.AlertFiring) {
		if a.Rule == "reports_failed" {
			held = a
		}
	}
	if !slices.Equal(held.InhibitedBy, []string{"warehouse_failed"}) || !strings.HasSuffix(held.Summary, "(inhibited by warehouse_failed)") {
		t.Fatalf("held alert %+v", held)
	}
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the group timer was not armed")
	}
	f.clock.Advance(2 * time.Minute) // both quiet windows end: the source resolves
	for resolved := 0; resolved < 2; {
		if a := <-changes; a.State == apollo.AlertResolved {
			resolved++
		}
	}
	apply("report_daily")
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Rule != "reports_failed" || len(n.Alert.InhibitedBy) != 0 {
		t.Fatalf("after the source resolved: %+v", n)
	}
	f.eng.Stop(context.Background())
	if got := len(f.sink.Notes()); got != 2 {
		t.Fatalf("%d notifications, want the source's and the released match's: %+v", got, f.sink.Notes())
	}
	if st := f.eng.Stats(); st.Inhibited != 1 {
		t.Fatalf("inhibited %d, want 1", st.Inhibited)
	}
}

// Inhibit rules come with the rules file: an INHIBIT rule added to the
// file acts from the reload that reads it.
func TestInhibitRuleFromReloadedFile(t *testing.T) {
	t.Parallel()
	tb := newTable()
	tb.set("warehouse_load", failing(1, 1))
	tb.set("report_daily", failing(1, 1))
	f := newFixture(t, "", tb, nil)
	rulesOnly := inhibitSrc[strings.Index(inhibitSrc, "\n")+1:]
	path := filepath.Join(t.TempDir(), "rules.txt")
	if err := os.WriteFile(path, []byte(rulesOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := alert.NewLoader(alert.LoaderOptions{Path: path, Clock: f.clock, Logger: quiet,
		OnLoad: func(rs []*rules.Rule, src []byte) { f.eng.SetRulesSource("", rs, src) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(inhibitSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Reload()
	f.eval(10 * time.Second)
	ns := f.expectSent(firing)
	if ns[0].Alert.Rule != "warehouse_load_failed" {
		t.Fatalf("sent %+v, want the source's only", ns[0])
	}
	for _, a := range f.eng.Alerts("", apollo.AlertFiring) {
		if a.Rule != "warehouse_load_failed" && !slices.Equal(a.InhibitedBy, []string{"warehouse_load_failed"}) {
			t.Fatalf("not held after the reload: %+v", a)
		}
	}
}
