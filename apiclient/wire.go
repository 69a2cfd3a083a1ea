package apiclient

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/apollo-11/apollo"
)

// The REST answers and request bodies (docs/protocol.md). Domain types
// (apollo.Task, apollo.Alert, apollo.Silence, ...) go on the wire as they
// are; the types here are the envelopes and the views made for the API.

// Health is the answer of GET /healthz ("ok") and GET /readyz ("ready",
// or "recovering" with status 503).
type Health struct {
	Status string `json:"status"`
	// Reason says why a server that has recovered cannot take requests
	// now (GET /readyz 503 "unavailable"): a scale-out node cut off NATS.
	Reason string `json:"reason,omitempty"`
}

// JobRow is one job's metrics over a window (GET /api/v1/metrics), or one
// step of a series (then T is set and Name is not).
type JobRow struct {
	Name        string  `json:"name,omitempty"`
	T           int64   `json:"t,omitempty"` // series points: start of the step, Unix ms
	Count       int64   `json:"count"`
	Success     int64   `json:"success"`
	Failed      int64   `json:"failed"`
	Timeout     int64   `json:"timeout"`
	Started     int64   `json:"started"`
	Late        int64   `json:"late"`
	Missed      int64   `json:"missed"`
	Due         int64   `json:"due"` // runs that were due, each once: lateRate's denominator
	FailedRate  float64 `json:"failedRate"`
	TimeoutRate float64 `json:"timeoutRate"`
	LateRate    float64 `json:"lateRate"`
	AvgCostMs   float64 `json:"avgCostMs"`
	MinCostMs   int64   `json:"minCostMs"`
	MaxCostMs   int64   `json:"maxCostMs"`
	Backlog     int64   `json:"backlog"`
	Running     int64   `json:"running"`
	Throughput  float64 `json:"throughput"` // finished runs per minute
}

// FailureRate is the share of finished runs that failed or timed out, 0
// when none finished. failedRate on the wire counts failures alone; every
// view shows this one, since a timeout is a failure to the reader (issue 21).
func (r JobRow) FailureRate() float64 {
	if r.Count == 0 {
		return 0
	}
	return float64(r.Failed+r.Timeout) / float64(r.Count)
}

// MetricsPage is GET /api/v1/metrics: a row per job under the prefix, and
// their total.
type MetricsPage struct {
	Window string   `json:"window"`
	Prefix string   `json:"prefix"`
	Total  JobRow   `json:"total"`
	Jobs   []JobRow `json:"jobs"`
	Next   string   `json:"next,omitempty"` // more jobs follow: ask again with after=Next
}

// Series is a run of steps of one window, oldest first.
type Series struct {
	Window string   `json:"window"`
	Step   string   `json:"step"`
	Points []JobRow `json:"points"`
}

// JobSeries is GET /api/v1/metrics/{name}: one job's series.
type JobSeries struct {
	Name string `json:"name"`
	Series
}

// PrefixSeries is GET /api/v1/series: the series of every job under a
// prefix, added up.
type PrefixSeries struct {
	Prefix string `json:"prefix"`
	Series
}

// TaskPage is GET /api/v1/tasks: a page of tasks, most recently updated
// first; Next is the cursor of the next page, "" on the last.
type TaskPage struct {
	Tasks []apollo.Task `json:"tasks"`
	Next  string        `json:"next,omitempty"`
}

// Correction is the body of POST /api/v1/tasks/{id}/status.
type Correction struct {
	Status apollo.Status `json:"status"`
	Reason string        `json:"reason"`
}

// Alert is an alert as the API shows it: with the silences that hold its
// notifications back.
type Alert struct {
	apollo.Alert
	SilencedBy []string `json:"silencedBy,omitempty"`
}

// AlertList is GET /api/v1/alerts.
type AlertList struct {
	Alerts []Alert `json:"alerts"`
	Total  int     `json:"total"` // the alerts there are; Alerts holds the first limit
}

// AckAnswer is POST /api/v1/alerts/{id}/ack: the alert acknowledged.
type AckAnswer struct {
	Alert Alert `json:"alert"`
}

// SilenceRequest is the body of POST /api/v1/silences: at least one
// matcher, a comment, and how long: EndsAt or Duration (e.g. "2h"), not
// both. StartsAt is now when zero.
type SilenceRequest struct {
	Rule     string            `json:"rule,omitempty"`
	Group    string            `json:"group,omitempty"` // the alert's group exactly
	Prefix   string            `json:"prefix,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	StartsAt time.Time         `json:"startsAt,omitzero"`
	EndsAt   time.Time         `json:"endsAt,omitzero"`
	Duration string            `json:"duration,omitempty"`
	Comment  string            `json:"comment"`
}

// SilenceList is GET /api/v1/silences.
type SilenceList struct {
	Silences []apollo.Silence `json:"silences"`
}

// SilenceAnswer is POST /api/v1/silences: the silence as the server keeps
// it, with its ID.
type SilenceAnswer struct {
	Silence apollo.Silence `json:"silence"`
}

// Removed is DELETE /api/v1/silences/{id}.
type Removed struct {
	Removed string `json:"removed"`
}

// Rule is one alert rule as the API shows it: its canonical text and its
// JSON form.
type Rule struct {
	Name string          `json:"name"`
	Kind string          `json:"kind"` // rate, event or inhibit
	Text string          `json:"text"`
	JSON json.RawMessage `json:"json"`
}

// RuleSet is GET and PUT /api/v1/rules: the rules, the inhibit rules (kind
// inhibit), and the file they came from as the server holds it.
type RuleSet struct {
	Rules    []Rule `json:"rules"`
	Inhibits []Rule `json:"inhibits"`
	Source   string `json:"source"`
}

// FileTag names one version of a file the API serves whole and takes
// back whole (the rules, RuleSet.Source; the expectations,
// Expectations.Source), as the server gives it in the ETag of GET and PUT
// and takes it back in If-Match: a strong entity tag of the file's bytes.
func FileTag(src string) string {
	sum := sha256.Sum256([]byte(src))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// Changed is the refusal of a whole file put back (If-Match) over another
// version than the one read: what, the file's name for people ("rules").
func Changed(what string) *apollo.Error {
	return &apollo.Error{Code: apollo.EPRECONDITION, Field: "If-Match",
		Message: "the " + what + " changed since you read them (saved meanwhile by someone else); nothing was changed",
		Hint:    "read the " + what + " again, make your change to them, and save"}
}

// RuleProblem is one problem of a refused rules file, with its place.
type RuleProblem struct {
	Pos     string `json:"pos"` // "LINE:COL"
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// JobList is GET /api/v1/jobs: the jobs of the scheduler in the server.
type JobList struct {
	Jobs []apollo.ScheduledJob `json:"jobs"`
}

// JobAction is POST /api/v1/jobs/{name}/run, /pause and /resume; TaskID is
// the run a "run" started.
type JobAction struct {
	Job    string `json:"job"`
	TaskID string `json:"taskID,omitempty"`
}

// Run is one run of a job on the health board.
type Run struct {
	TaskID     string        `json:"taskID"`
	Status     apollo.Status `json:"status"`
	Late       bool          `json:"late,omitempty"`
	ReportedAt int64         `json:"reportedAt"`
	StartedAt  int64         `json:"startedAt,omitempty"`
	FinishedAt int64         `json:"finishedAt,omitempty"`
	CostMs     int64         `json:"costMs,omitempty"`
}

// JobHealth is one job on the health board: its verdict and why.
type JobHealth struct {
	Name    string         `json:"name"`
	Verdict apollo.Verdict `json:"verdict"`
	LastRun *Run           `json:"lastRun,omitempty"` // the newest finished run
	// UsualCostMs and UsualEveryMs are the median duration and interval
	// of the recent runs, absent while unknown.
	UsualCostMs   int64 `json:"usualCostMs,omitempty"`
	UsualEveryMs  int64 `json:"usualEveryMs,omitempty"`
	LastRunAt     int64 `json:"lastRunAt,omitempty"` // the newest run's first report
	Running       int64 `json:"running"`
	RunningSince  int64 `json:"runningSince,omitempty"`
	NextRunAt     int64 `json:"nextRunAt,omitempty"` // when known (the scheduler)
	LastSuccessAt int64 `json:"lastSuccessAt,omitempty"`
	Runs          []Run `json:"runs"` // oldest first
}

// HealthBoard is GET /api/v1/jobs/health: the jobs under a prefix, worst
// first (docs/dashboard.md).
type HealthBoard struct {
	Now      int64                  `json:"now"`
	Total    int                    `json:"total"`    // jobs under the prefix
	Verdicts map[apollo.Verdict]int `json:"verdicts"` // of those, by verdict
	Jobs     []JobHealth            `json:"jobs"`     // the first limit of them, worst first
}

// AttemptList is GET /api/v1/notifications: the delivery record, newest
// first.
type AttemptList struct {
	Attempts []apollo.Attempt `json:"attempts"`
}

// ChannelTest is POST /api/v1/channels/{name}/test: the attempt to send a
// test message through the channel. Its Outcome says how it went ("sent",
// or "failed" with the Error); either way the test was made.
type ChannelTest struct {
	Attempt apollo.Attempt `json:"attempt"`
}

// Expectations is GET and PUT /api/v1/expectations: the tenant's job
// expectations file as the server holds it (docs/expectations.md), and
// how many expectations it has.
type Expectations struct {
	Source string `json:"source"`
	Count  int    `json:"count"`
}

// Suggestion is the learner's proposal of an expectation for one job,
// GET /api/v1/expectations/suggestions. Durations are Go durations ("10m");
// what was not learned is left out. YAML is the proposal as an entry of
// an expectations file.
type Suggestion struct {
	Job        string  `json:"job"`
	Describe   string  `json:"describe"`
	Confidence float64 `json:"confidence"`
	Runs       int     `json:"runs"`
	Durations  int     `json:"durations"`
	Schedule   string  `json:"schedule,omitempty"`
	Timezone   string  `json:"timezone,omitempty"`
	Every      string  `json:"every,omitempty"`
	Grace      string  `json:"grace,omitempty"`
	MaxRuntime string  `json:"maxRuntime,omitempty"`
	MinRuntime string  `json:"minRuntime,omitempty"`
	YAML       string  `json:"yaml"`
}

// SuggestionList is GET /api/v1/expectations/suggestions.
type SuggestionList struct {
	Suggestions []Suggestion `json:"suggestions"`
	// More says that more jobs have proposals than the limit let through
	// (the first jobs by name are listed).
	More bool `json:"more,omitempty"`
}
