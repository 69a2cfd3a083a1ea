package metrics

import "github.com/apollo-11/apollo"

// The aggregator's figures for GET /metrics (docs/monitoring.md describes
// each).
var (
	figJobs = &apollo.Family{Name: "apollo_metrics_jobs", Kind: apollo.FigureGauge,
		Help: "Jobs with metrics in memory, over every tenant."}
	figBuckets = &apollo.Family{Name: "apollo_metrics_buckets", Kind: apollo.FigureGauge,
		Help: "10-second buckets held."}
	figRollups = &apollo.Family{Name: "apollo_metrics_rollups", Kind: apollo.FigureGauge,
		Help: "1-minute rollups held."}
	figBytes = &apollo.Family{Name: "apollo_metrics_memory_bytes", Kind: apollo.FigureGauge,
		Help: "Estimated memory held by the metrics aggregator."}
	figDropped = &apollo.Family{Name: "apollo_metrics_changes_dropped_total", Kind: apollo.FigureCounter, Labels: []string{"reason"},
		Help: "Changes not counted in metrics, by reason: too_old (before the rollup retention), too_new (over a minute ahead of when the server received it)."}
)

// Figures writes the aggregator's counters and gauges (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figJobs, float64(s.Names))
	w.Add(figBuckets, float64(s.Buckets))
	w.Add(figRollups, float64(s.Rollups))
	w.Add(figBytes, float64(s.Bytes))
	w.Add(figDropped, float64(s.TooOld), "too_old")
	w.Add(figDropped, float64(s.TooNew), "too_new")
}
