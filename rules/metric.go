package rules

import (
	"fmt"
	"strings"
)

// Metric is one number the alert engine can compare. The values are dense
// from 0 so that an engine can keep a window's numbers in a
// [NumMetrics]float64 array indexed by Metric.
type Metric uint8

// The metrics of a window. docs/rules.md gives each one's exact meaning.
const (
	MetricCount       Metric = iota // finished runs in the window
	MetricFailed                    // runs that ended failed
	MetricTimeout                   // runs that ended timeout
	MetricSuccess                   // runs that ended success
	MetricStarted                   // runs that started (running) in the window
	MetricLate                      // runs that started late or never started
	MetricFailedRate                // failed / count
	MetricTimeoutRate               // timeout / count
	MetricSuccessRate               // success / count
	MetricLateRate                  // late / runs that should have started
	MetricAvgCost                   // mean duration of finished runs, ms
	MetricMaxCost                   // longest finished run, ms
	MetricMinCost                   // shortest finished run, ms
	MetricBacklog                   // runs pending now (a gauge)
	MetricRunning                   // runs running now (a gauge)
	MetricThroughput                // finished runs per minute
	MetricMissed                    // runs that were due and did not start

	NumMetrics // the number of metrics; not a metric
)

var metricNames = [NumMetrics]string{
	"count", "failed", "timeout", "success", "started", "late",
	"failed_rate", "timeout_rate", "success_rate", "late_rate",
	"avg_cost", "max_cost", "min_cost", "backlog", "running", "throughput", "missed",
}

// ParseMetric looks a metric up by name, ignoring case.
func ParseMetric(name string) (Metric, bool) {
	for m, n := range metricNames {
		if strings.EqualFold(n, name) {
			return Metric(m), true
		}
	}
	return 0, false
}

func (m Metric) String() string {
	if m < NumMetrics {
		return metricNames[m]
	}
	return fmt.Sprintf("Metric(%d)", uint8(m))
}

// Unit names what a metric's value counts: "runs", "fraction" (0..1),
// "ms" or "runs/min". Engines use it to print values for people.
func (m Metric) Unit() string {
	switch m.class() {
	case classFraction:
		return "fraction"
	case classMillis:
		return "ms"
	case classPerMinute:
		return "runs/min"
	}
	return "runs"
}

// unitClass decides which literal units may be compared with a metric:
// "failed_rate > 30s" is a mistake worth reporting, not a rule that never
// fires.
type unitClass uint8

const (
	classCount unitClass = iota
	classFraction
	classMillis
	classPerMinute
)

func (m Metric) class() unitClass {
	switch m {
	case MetricFailedRate, MetricTimeoutRate, MetricSuccessRate, MetricLateRate:
		return classFraction
	case MetricAvgCost, MetricMaxCost, MetricMinCost:
		return classMillis
	case MetricThroughput:
		return classPerMinute
	}
	return classCount
}
