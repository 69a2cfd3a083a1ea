package apollo

// Verdict is a job's health as the on-call engineer reads it first: one
// word for every view (web, TUI, CLI, the Prometheus exposition), decided
// by JobFacts.Verdict from the job's recent runs. docs/dashboard.md
// defines each in the same words.
type Verdict string

// The verdicts, worst first: a job with several problems shows the worst.
const (
	// VerdictFailing: its newest finished run failed.
	VerdictFailing Verdict = "failing"
	// VerdictTimingOut: its newest finished run timed out.
	VerdictTimingOut Verdict = "timing_out"
	// VerdictRunningLong: a run has been running for longer than
	// LongRunFactor times the usual duration, and at least LongRunMargin
	// longer than it.
	VerdictRunningLong Verdict = "running_long"
	// VerdictLate: its newest run is late (started late or missed its
	// start) and has not finished, or its next expected run is more than
	// LateGrace overdue.
	VerdictLate Verdict = "late"
	// VerdictNoRecentRuns: no new run has been reported for longer than
	// QuietFactor times its usual interval, and at least QuietMin.
	VerdictNoRecentRuns Verdict = "no_recent_runs"
	// VerdictOK: none of the above.
	VerdictOK Verdict = "ok"
)

// Verdicts lists every verdict, worst first: the order the job health
// board sorts by.
func Verdicts() []Verdict {
	return []Verdict{VerdictFailing, VerdictTimingOut, VerdictRunningLong, VerdictLate, VerdictNoRecentRuns, VerdictOK}
}

// Rank is the verdict's place in Verdicts (0 is the worst); an unknown
// verdict ranks after ok.
func (v Verdict) Rank() int {
	for i, w := range Verdicts() {
		if v == w {
			return i
		}
	}
	return len(Verdicts())
}

// The thresholds of the verdicts. The factors are relative to the job's
// own habits, so one rule fits a job of seconds and one of hours; the
// minimums keep a job of milliseconds from flapping on scheduling noise.
const (
	LongRunFactor = 3
	LongRunMargin = 60_000 // ms
	LateGrace     = 60_000 // ms after the next expected run
	QuietFactor   = 3
	QuietMin      = 60_000 // ms
	// UsualRuns is how many runs make a habit: fewer finished runs with a
	// duration leave the usual duration unknown, fewer runs the usual
	// interval.
	UsualRuns = 3
)

// JobFacts are what a job's verdict is decided from. Times are Unix
// milliseconds; zero means unknown or none.
type JobFacts struct {
	// LastStatus is the status of the newest finished run (by finish
	// time); StatusNone when none has finished.
	LastStatus Status
	// LateNow: the newest run is marked late and has not finished.
	LateNow bool
	// RunningSince is when the longest-running run still running started.
	RunningSince int64
	// UsualCostMs is the median duration of the recent finished runs; 0
	// when fewer than UsualRuns have one.
	UsualCostMs int64
	// UsualEveryMs is the median gap between the first reports of the
	// recent runs; 0 when fewer than UsualRuns were reported.
	UsualEveryMs int64
	// LastRunAt is when the newest run was first reported.
	LastRunAt int64
	// NextRunAt is when the next run is expected, where something knows
	// (the scheduler, job expectations).
	NextRunAt int64
}

// Verdict decides the job's health at now (Unix ms).
func (f *JobFacts) Verdict(now int64) Verdict {
	switch {
	case f.LastStatus == StatusFailed:
		return VerdictFailing
	case f.LastStatus == StatusTimeout:
		return VerdictTimingOut
	case f.RunningLong(now):
		return VerdictRunningLong
	case f.LateNow, f.NextRunAt > 0 && now-f.NextRunAt > LateGrace:
		return VerdictLate
	case f.UsualEveryMs > 0 && f.LastRunAt > 0 && now-f.LastRunAt > max(QuietFactor*f.UsualEveryMs, QuietMin):
		return VerdictNoRecentRuns
	}
	return VerdictOK
}

// RunningLong reports whether a run still running has gone on too long
// at now: only when the usual duration is known.
func (f *JobFacts) RunningLong(now int64) bool {
	if f.RunningSince == 0 || f.UsualCostMs == 0 {
		return false
	}
	return now-f.RunningSince > max(LongRunFactor*f.UsualCostMs, f.UsualCostMs+LongRunMargin)
}

// How many recent runs the metrics keep of each job (their Options'
// RecentRuns), and the most the API answers.
const (
	DefaultRecentRuns = 50
	MaxRecentRuns     = 200
)

// DurationBuckets are the upper bounds, in ms, of every job's histogram
// of run durations; a last bucket holds the longer runs. They span the
// sub-second jobs and the ones of hours that schedulers run side by side.
var DurationBuckets = [...]int64{100, 1_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 10_800_000}

// RecentRun is one of a job's recent runs, as its health record keeps it.
type RecentRun struct {
	TaskID string
	Status Status
	Late   bool
	// ReportedAt orders the runs: the time of the run's first report
	// (Unix ms), which no later report moves. Ordering by a time that
	// never changes is what makes the order the same whatever order the
	// changes of different tasks come in.
	ReportedAt int64
	StartedAt  int64 // 0 until it started
	FinishedAt int64 // 0 until it finished
	CostMs     int64 // 0 until it finished, or when it reported none
}

// JobHealth is what the metrics know of one job's health: the facts its
// verdict is decided from, its newest finished run, and totals since the
// job was first seen (a job idle for the rollup retention is forgotten,
// and its totals start again from zero when it returns).
type JobHealth struct {
	Name string
	// Facts has no NextRunAt: schedules are not the metrics' to know.
	Facts   JobFacts
	Last    RecentRun // the newest finished run; TaskID "" when none
	Runs    int       // recent runs held
	Running int64     // tasks running now
	// Counters since the job was first seen, as Summary counts them.
	Success, Failed, Timeout int64
	CostSum, CostN           int64
	// Durations counts the finished runs with a cost by DurationBuckets;
	// the last slot holds the longer ones. They add up to CostN.
	Durations [len(DurationBuckets) + 1]int64
	// When a run last finished with each final status, Unix ms; 0 never.
	LastSuccessAt, LastFailedAt, LastTimeoutAt int64
}
