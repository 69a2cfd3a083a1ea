package rules_test

import (
	"fmt"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// window is one group's metrics, as an engine would hand them to Eval.
type window struct{ cur, prev map[rules.Metric]float64 }

func (w window) Value(m rules.Metric) float64    { return w.cur[m] }
func (w window) Previous(m rules.Metric) float64 { return w.prev[m] }

func ExampleParse() {
	src := `RULE task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m NOTIFY: dingtalk, email`
	rs, err := rules.Parse("rules.txt", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := rs[0]
	fmt.Println(r.Name, r.Prefix, r.Window, r.Duration, r.Notify, r.Severity)
	fmt.Println(r.Matches("batch_daily"), r.Matches("etl_daily"))
	fmt.Println("fetch:", r.Expr.Metrics())

	w := window{cur: map[rules.Metric]float64{rules.MetricFailedRate: 0.07}}
	fmt.Println(r.Expr.Eval(w), r.Expr.Observe(w))
	fmt.Println(r)
	// Output:
	// rule_6423e71a batch_ 5m0s 2m0s [dingtalk email] warning
	// true false
	// fetch: [failed_rate]
	// true 0.07
	// RULE rule_6423e71a task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m SEVERITY: warning NOTIFY: dingtalk, email
}

func ExampleParse_errors() {
	src := `RULE slow task_prefix: "etl_" WINDOW: 15s
  THRESHOLD: pct_change(avg_cost) > 50% and fail_rate > 1%
RULE task_prefix: "batch_" ON: failed, timout`
	_, err := rules.Parse("rules.txt", []byte(src))
	fmt.Println(err)
	// Output:
	// rules.txt:1:39: WINDOW 15s is not a multiple of 10s (expected 10s to 24h in steps of 10s); metrics are kept in 10-second buckets
	// rules.txt:2:45: unknown metric "fail_rate" (expected a metric); did you mean failed_rate?
	// rules.txt:3:40: unknown status "timout" (expected pending, running, success, failed, timeout, manual_blocked); did you mean timeout?
}

func ExampleExpr_Eval() {
	x, err := rules.ParseExpr("pct_change(avg_cost) > 50% and count >= 10")
	if err != nil {
		fmt.Println(err)
		return
	}
	slower := window{
		cur:  map[rules.Metric]float64{rules.MetricAvgCost: 45000, rules.MetricCount: 12},
		prev: map[rules.Metric]float64{rules.MetricAvgCost: 20000},
	}
	fmt.Println(x.Eval(slower), x.Observe(slower), x.UsesPrevious())
	// With no previous window there is no change to compare: false.
	fresh := window{cur: slower.cur}
	fmt.Println(x.Eval(fresh), x.Observe(fresh))
	// Output:
	// true 1.25 true
	// false 0
}

func ExampleInhibitedBy() {
	f, err := rules.ParseFile("rules.txt", []byte(`
RULE warehouse_failed task_prefix: "warehouse_" ON: failed, missed SEVERITY: critical LABELS: team=data
RULE reports_failed task_prefix: "report_" BY: name THRESHOLD: failed > 0 LABELS: team=data
INHIBIT reports_echo SOURCE: rule=warehouse_failed TARGET: task_prefix="report_" EQUAL: team
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	data := map[string]string{"team": "data"}
	firing := []apollo.Alert{{ID: "a1", Rule: "warehouse_failed", Group: "warehouse_", State: apollo.AlertFiring, Severity: apollo.SeverityCritical, Labels: data}}
	report := apollo.Alert{ID: "a2", Rule: "reports_failed", Group: "report_daily", State: apollo.AlertFiring, Labels: data}
	if in, by := rules.InhibitedBy(f.Inhibits, &report, firing); in != nil {
		fmt.Printf("%s is held by %s (alert %s of rule %s)\n", report.Group, in.Name, by.ID, by.Rule)
	}
	fmt.Println(f.Rules[0].Occurrences, f.Inhibits[0])
	// Output:
	// report_daily is held by reports_echo (alert a1 of rule warehouse_failed)
	// [missed] INHIBIT reports_echo SOURCE: rule=warehouse_failed TARGET: task_prefix=report_ EQUAL: team
}
