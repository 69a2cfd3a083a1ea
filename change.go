package apollo

// Change is one record applied to one task: the record, what the task was
// before, and the task after. The bus hands Changes to metrics and to
// stream subscribers, one task's Changes in sequence order; Task carries no
// History.
type Change struct {
	Record Record
	// Prev is what the task was before the change that observers read;
	// its identity is Task's. Prev.Status is StatusNone for a new task.
	Prev Before
	Task Task
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

// Before is what a Change keeps of its task as it was: the fields an
// observer compares with the task after (a job's counts move by them). A
// full Task was twice its size, and the bus writes one Change per applied
// event (docs/benchmarks.md, "A slimmer Change").
type Before struct {
	// Name is the task's job name before the change: a later event may
	// name a run that was reported without one.
	Name             string
	Status           Status
	Late             bool
	StartedAt        int64
	FinishedAt       int64
	UpdatedAt        int64
	CostMs           int64
	FinishReceivedAt int64
}

// BeforeOf is what a Change keeps of t.
func BeforeOf(t *Task) Before {
	return Before{Name: t.Name, Status: t.Status, Late: t.Late, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt,
		UpdatedAt: t.UpdatedAt, CostMs: t.CostMs, FinishReceivedAt: t.FinishReceivedAt}
}

// PrevTask is the task as it was before c, as far as c keeps it: Prev's
// fields under Task's identity. The fields Before does not keep are zero.
func (c *Change) PrevTask() Task {
	p := &c.Prev
	return Task{TaskID: c.Task.TaskID, Tenant: c.Task.Tenant, Name: p.Name, Status: p.Status, Late: p.Late,
		StartedAt: p.StartedAt, FinishedAt: p.FinishedAt, UpdatedAt: p.UpdatedAt, CostMs: p.CostMs,
		FinishReceivedAt: p.FinishReceivedAt}
}
