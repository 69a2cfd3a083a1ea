package sched

import "github.com/apollo-11/apollo"

// The scheduler's figures for GET /metrics (docs/monitoring.md describes
// each).
var (
	figRuns = &apollo.Family{Name: "apollo_scheduler_runs_total", Kind: apollo.FigureCounter,
		Help: "Runs the scheduler started."}
	figSkipped = &apollo.Family{Name: "apollo_scheduler_skipped_total", Kind: apollo.FigureCounter,
		Help: "Runs not started and reported manual_blocked instead: job paused, previous run still running, upstream not successful, or shutting down."}
	figMissed = &apollo.Family{Name: "apollo_scheduler_missed_total", Kind: apollo.FigureCounter,
		Help: "Catch-up ticks dropped by catchup: skip."}
	figReportErrors = &apollo.Family{Name: "apollo_scheduler_report_errors_total", Kind: apollo.FigureCounter,
		Help: "Events the scheduler failed to report; the jobs run on regardless."}
	figStateErrors = &apollo.Family{Name: "apollo_scheduler_state_errors_total", Kind: apollo.FigureCounter,
		Help: "Failed reads or writes of the scheduler's state file."}
)

// Figures writes the scheduler's counters (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figRuns, float64(s.Runs))
	w.Add(figSkipped, float64(s.Skipped))
	w.Add(figMissed, float64(s.Missed))
	w.Add(figReportErrors, float64(s.ReportErrors))
	w.Add(figStateErrors, float64(s.StateErrors))
}
