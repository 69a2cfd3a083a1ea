package apollo

// Change is one record applied to one task: the record, and the task as it
// was before and after. The bus hands Changes to metrics and to stream
// subscribers, one task's Changes in sequence order; Prev and Task carry no
// History.
type Change struct {
	Record Record
	Prev   Task // Prev.Status is StatusNone for a new task
	Task   Task
	// BecameLate is set on the change that made the task late: a running
	// event too long after scheduledAt, or a missed start.
	BecameLate bool
	// LSN is the log position of the record whose decision made this
	// change: its own, or, for a waiting event that a later one made
	// legal, the later one's. The replay of that record makes the change
	// again. 0 when the bus keeps no log. It lets an observer that acts on
	// changes know which ones it has heard of across a restart
	// (docs/architecture.md, "Replay rebuilds state; it is not news").
	LSN uint64 `json:"lsn,omitempty"`
}
