package alert

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// values presents one group's metrics to rules.Expr. A cycle reuses one
// values for every group, so that Eval, which takes an interface, does
// not allocate per group.
type values struct {
	cur, prev *apollo.Summary
	window    time.Duration
}

var _ rules.Values = (*values)(nil)

func (v *values) Value(m rules.Metric) float64 { return metricValue(v.cur, m, v.window) }

func (v *values) Previous(m rules.Metric) float64 {
	if v.prev == nil {
		return math.NaN()
	}
	return metricValue(v.prev, m, v.window)
}

// metricValue is one metric of a Summary. A rate or a cost with nothing
// to divide by is NaN, not 0: rules compare NaN as false, so
// "success_rate < 90%" stays quiet for a job that did not run, while
// "count == 0" catches it (apollo.Summary's own rate methods return 0).
func metricValue(s *apollo.Summary, m rules.Metric, window time.Duration) float64 {
	switch m {
	case rules.MetricCount:
		return float64(s.Count)
	case rules.MetricFailed:
		return float64(s.Failed)
	case rules.MetricTimeout:
		return float64(s.Timeout)
	case rules.MetricSuccess:
		return float64(s.Success)
	case rules.MetricStarted:
		return float64(s.Started)
	case rules.MetricLate:
		return float64(s.Late)
	case rules.MetricFailedRate:
		return ratio(s.Failed, s.Count)
	case rules.MetricTimeoutRate:
		return ratio(s.Timeout, s.Count)
	case rules.MetricSuccessRate:
		return ratio(s.Success, s.Count)
	case rules.MetricLateRate:
		return ratio(s.Late, s.Due())
	case rules.MetricAvgCost:
		return ratio(s.CostSum, s.CostN)
	case rules.MetricMaxCost:
		return costOrNaN(s, s.CostMax)
	case rules.MetricMinCost:
		return costOrNaN(s, s.CostMin)
	case rules.MetricBacklog:
		return float64(s.Backlog)
	case rules.MetricRunning:
		return float64(s.Running)
	case rules.MetricThroughput:
		return float64(s.Count) / window.Minutes()
	case rules.MetricMissed:
		return float64(s.Missed)
	}
	return math.NaN()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func costOrNaN(s *apollo.Summary, v int64) float64 {
	if s.CostN == 0 {
		return math.NaN()
	}
	return float64(v)
}

// groupName is how a summary names a group: "batch_*", "all jobs", or the
// job itself with BY: name.
func groupName(prefix, group string, byName bool) string {
	switch {
	case byName:
		return group
	case prefix == "":
		return "all jobs"
	}
	return prefix + "*"
}

// describe is an alert's one readable line: the condition with the
// observed value after the metric it belongs to, the group and the
// window, e.g. "failed_rate 0.12 > 0.05 for batch_* over 5m".
func describe(rr *rateRule, group string, observed float64) string {
	return annotate(rr.expr, rr.Expr.Metrics(), observed) +
		" for " + groupName(rr.Prefix, group, rr.By != "") + " over " + shortDuration(rr.Window)
}

// annotate puts the observed value after the first metric of expr (the
// one Observe reports); pct_change values read as a signed percentage.
func annotate(expr string, ms []rules.Metric, observed float64) string {
	if len(ms) == 0 {
		return expr
	}
	m := ms[0]
	name := m.String()
	at := wordIndex(expr, name)
	if at < 0 {
		return expr + " (" + name + " " + formatValue(m, observed) + ")"
	}
	end := at + len(name)
	val := formatValue(m, observed)
	if strings.HasSuffix(expr[:at], "pct_change(") && strings.HasPrefix(expr[end:], ")") {
		end++
		val = formatChange(observed)
	}
	return expr[:end] + " " + val + expr[end:]
}

// wordIndex finds name in s as a whole word, so "failed" is not found
// inside "failed_rate".
func wordIndex(s, name string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], name)
		if i < 0 {
			return -1
		}
		i += off
		before := i == 0 || !isWordByte(s[i-1])
		after := i+len(name) == len(s) || !isWordByte(s[i+len(name)])
		if before && after {
			return i
		}
		off = i + len(name)
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// formatValue prints a metric's value in its unit: fractions and counts
// as short numbers, costs as durations.
func formatValue(m rules.Metric, v float64) string {
	if m.Unit() == "ms" {
		return shortDuration(time.Duration(v * float64(time.Millisecond)))
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func formatChange(v float64) string {
	s := strconv.FormatFloat(v*100, 'f', 0, 64) + "%"
	if v > 0 {
		s = "+" + s
	}
	return s
}

// shortDuration prints 5m rather than 5m0s, and rounds what people do
// not read (milliseconds of a minute-long run).
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
