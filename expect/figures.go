package expect

import "github.com/apollo-11/apollo"

// The learner's figures for GET /metrics (docs/monitoring.md describes
// each): past its limit of jobs it learns nothing of new ones, and that
// must show.
var (
	figLearnerJobs = &apollo.Family{Name: "apollo_learner_jobs", Kind: apollo.FigureGauge,
		Help: "Jobs whose runs the expectations learner keeps a sample of, over every tenant."}
	figLearnerDropped = &apollo.Family{Name: "apollo_learner_runs_dropped_total", Kind: apollo.FigureCounter,
		Help: "Runs not learned because the learner watched as many jobs as it may (200 000): their jobs get no proposal."}
)

// LearnerStats is what a Learner holds and what it could not.
type LearnerStats struct {
	Jobs    int   `json:"jobs"`    // jobs with a sample
	Dropped int64 `json:"dropped"` // runs of further jobs not learned, since the start
}

// Figures writes the learner's gauge and counter (GET /metrics).
func (s LearnerStats) Figures(w apollo.FigureWriter) {
	w.Add(figLearnerJobs, float64(s.Jobs))
	w.Add(figLearnerDropped, float64(s.Dropped))
}
