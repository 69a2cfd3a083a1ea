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
}
