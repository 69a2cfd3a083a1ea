package redisstore

import "github.com/apollo-11/apollo"

// The flusher's figures for GET /metrics (docs/monitoring.md describes
// each).
var (
	figFlushes = &apollo.Family{Name: "apollo_redis_flushes_total", Kind: apollo.FigureCounter,
		Help: "Flushes of metrics to Redis, good or not."}
	figErrors = &apollo.Family{Name: "apollo_redis_errors_total", Kind: apollo.FigureCounter,
		Help: "Flushes of metrics to Redis that failed; the changes are kept and retried."}
	figFullCopies = &apollo.Family{Name: "apollo_redis_full_copies_total", Kind: apollo.FigureCounter,
		Help: "Flushes that copied every job: at start, after the dirty set overflowed, and after Redis lost the metrics."}
	figRefills = &apollo.Family{Name: "apollo_redis_refills_total", Kind: apollo.FigureCounter,
		Help: "Times the flusher found that Redis had lost the metrics it wrote (restarted empty, flushed) and copied every job again."}
	figCommands = &apollo.Family{Name: "apollo_redis_commands_total", Kind: apollo.FigureCounter,
		Help: "Redis commands sent by good flushes."}
	figJobWrites = &apollo.Family{Name: "apollo_redis_job_writes_total", Kind: apollo.FigureCounter,
		Help: "Job writes made by flushes."}
	figDirty = &apollo.Family{Name: "apollo_redis_dirty_jobs", Kind: apollo.FigureGauge,
		Help: "Jobs with changes waiting for the next flush."}
	figLastFlush = &apollo.Family{Name: "apollo_redis_last_flush_timestamp_seconds", Kind: apollo.FigureGauge,
		Help: "End of the last good flush, Unix seconds; 0 before the first."}
)

// Figures writes the flusher's counters and gauges (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figFlushes, float64(s.Flushes))
	w.Add(figErrors, float64(s.Failures))
	w.Add(figFullCopies, float64(s.FullCopies))
	w.Add(figRefills, float64(s.Refills))
	w.Add(figCommands, float64(s.Commands))
	w.Add(figJobWrites, float64(s.Jobs))
	w.Add(figDirty, float64(s.Dirty))
	w.Add(figLastFlush, apollo.UnixSeconds(s.LastFlush))
}
