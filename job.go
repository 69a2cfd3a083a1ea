package apollo

import "time"

// ScheduledJob is one job of the scheduler (package sched) and where it
// stands: its schedule, its next tick, the last event of its latest run,
// whether it is paused and how many of its runs are in progress.
type ScheduledJob struct {
	Name       string    `json:"name"`
	Schedule   string    `json:"schedule,omitempty"`
	After      []string  `json:"after,omitempty"`
	Timezone   string    `json:"timezone"`
	Next       time.Time `json:"next,omitzero"`
	LastTaskID string    `json:"lastTaskID,omitempty"`
	LastStatus Status    `json:"lastStatus,omitzero"`
	LastAt     time.Time `json:"lastAt,omitzero"`
	Paused     bool      `json:"paused"`
	Running    int       `json:"running"`
}
