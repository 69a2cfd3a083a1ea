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
	// OpenJob asks for one job's metrics (the Jobs tab, the job selected).
	OpenJob struct{ Name string }
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
