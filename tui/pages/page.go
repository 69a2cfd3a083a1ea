package pages

import (
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/components"
)

// Env is what every page shares: the styles and the clock.
type Env struct {
	Styles *components.Styles
	Now    func() time.Time
}

// Intents: messages a page returns for the dashboard to act on.
type (
	// OpenTask asks for one task's details (GET /api/v1/tasks/{id}).
	OpenTask struct{ ID string }
	// FilterTasks asks the stream for the tasks whose job name or task ID
	// starts with Prefix ("" for all).
	FilterTasks struct{ Prefix string }
	// AckAlert asks to acknowledge an alert.
	AckAlert struct{ Alert apollo.Alert }
	// SilenceAlert asks to silence an alert's rule and group for a while.
	SilenceAlert struct {
		Alert   apollo.Alert
		For     time.Duration
		Comment string
	}
)

// intent wraps a message as a command.
func intent(m tea.Msg) tea.Cmd { return func() tea.Msg { return m } }

// Job is one job's row of GET /api/v1/metrics, or one point of
// GET /api/v1/metrics/{name} (then T is set and Name is not).
type Job struct {
	Name        string  `json:"name,omitempty"`
	T           int64   `json:"t,omitempty"`
	Count       int64   `json:"count"`
	Success     int64   `json:"success"`
	Failed      int64   `json:"failed"`
	Timeout     int64   `json:"timeout"`
	Started     int64   `json:"started"`
	Late        int64   `json:"late"`
	Missed      int64   `json:"missed"`
	FailedRate  float64 `json:"failedRate"`
	TimeoutRate float64 `json:"timeoutRate"`
	LateRate    float64 `json:"lateRate"`
	AvgCostMs   float64 `json:"avgCostMs"`
	MinCostMs   int64   `json:"minCostMs"`
	MaxCostMs   int64   `json:"maxCostMs"`
	Backlog     int64   `json:"backlog"`
	Running     int64   `json:"running"`
	Throughput  float64 `json:"throughput"`
}

// Silence is one entry of GET /api/v1/silences.
type Silence struct {
	ID        string    `json:"id"`
	Rule      string    `json:"rule,omitempty"`
	Prefix    string    `json:"prefix,omitempty"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
	Comment   string    `json:"comment,omitempty"`
}
