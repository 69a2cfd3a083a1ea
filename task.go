package apollo

// Task is the current state of one run, as the API and the stream show it.
// Times are Unix milliseconds; zero means "not known".
type Task struct {
	TaskID   string `json:"taskID"`
	Name     string `json:"name"`
	Tenant   string `json:"tenant,omitempty"`
	Status   Status `json:"status"`
	Sequence int64  `json:"sequence"`

	ScheduledAt int64 `json:"scheduledAt,omitempty"`
	StartedAt   int64 `json:"startedAt,omitempty"`
	FinishedAt  int64 `json:"finishedAt,omitempty"`
	// CreatedAt is server time when the run was first reported, and
	// UpdatedAt server time of its last change. Listings are ordered by
	// CreatedAt, newest first: it never moves, so paging sees each task
	// once however often tasks change meanwhile.
	CreatedAt int64 `json:"createdAt,omitempty"`
	UpdatedAt int64 `json:"updatedAt"`
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	CostMs    int64 `json:"costMs,omitempty"`
	// FinishReceivedAt is server time when the record that set FinishedAt
	// was received, Unix ms; 0 when unknown or not finished. The metrics
	// judge a finish against it whenever they count it in or out, so that
	// a correction takes out only what was counted in.
	FinishReceivedAt int64 `json:"-"`
	// Late is set when the run started later than its lateness threshold
	// after ScheduledAt, or was not started within its grace period.
	Late bool `json:"late,omitempty"`

	History []Record `json:"history,omitempty"`
}

// TaskFilter selects tasks for listing. Empty fields match everything.
type TaskFilter struct {
	Tenant string
	Prefix string // job name or task ID prefix
	Status Status
	// Since and Until bound UpdatedAt (Unix ms); zero is open.
	Since, Until int64
	Limit        int
	// Cursor is the opaque value a previous page returned.
	Cursor string
}
