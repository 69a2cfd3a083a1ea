package bus

import "github.com/apollo-11/apollo"

// The bus's figures for GET /metrics (docs/monitoring.md describes each).
var (
	figEvents = &apollo.Family{Name: "apollo_events_total", Kind: apollo.FigureCounter, Labels: []string{"result"},
		Help: "Events decided by the bus since start, replayed log records included, by result: accepted (applied; held and waited ones too), duplicate, illegal (transition not allowed), invalid, refused (answered retry_later: not stored)."}
	figHeld = &apollo.Family{Name: "apollo_events_held_total", Kind: apollo.FigureCounter,
		Help: "Accepted events whose task queue was full, so their change waited in the holding area."}
	figWaiting = &apollo.Family{Name: "apollo_events_waiting_total", Kind: apollo.FigureCounter,
		Help: "Events answered waiting: ahead of a missing earlier event of their task and not legal without it."}
	figWaitEnded = &apollo.Family{Name: "apollo_events_wait_ended_total", Kind: apollo.FigureCounter,
		Help: "Waiting events applied when the reorder window ended without the missing earlier events; the task's history marks the gap."}
	figTimeouts = &apollo.Family{Name: "apollo_timeouts_written_total", Kind: apollo.FigureCounter,
		Help: "Timeout records the bus wrote itself for running tasks past their deadline."}
	figMissedStarts = &apollo.Family{Name: "apollo_missed_starts_total", Kind: apollo.FigureCounter,
		Help: "Missed-start records the bus wrote for pending tasks that did not start in time."}
	figCorrections = &apollo.Family{Name: "apollo_corrections_total", Kind: apollo.FigureCounter,
		Help: "Manual status corrections by operators."}
	figEvicted = &apollo.Family{Name: "apollo_tasks_evicted_total", Kind: apollo.FigureCounter,
		Help: "Tasks moved out of memory after their retention."}
	figLogErrors = &apollo.Family{Name: "apollo_log_errors_total", Kind: apollo.FigureCounter,
		Help: "Records the bus failed to append to the log; their events were answered retry_later."}
	figSubscribersCut = &apollo.Family{Name: "apollo_bus_subscribers_cut_total", Kind: apollo.FigureCounter,
		Help: "Subscribers (stream hub, Redis publisher) cut off for not keeping up."}
	figTasks = &apollo.Family{Name: "apollo_tasks", Kind: apollo.FigureGauge,
		Help: "Tasks in memory."}
	figQueues = &apollo.Family{Name: "apollo_queue_tasks", Kind: apollo.FigureGauge,
		Help: "Tasks with changes waiting for the observers (metrics, alerting, stream)."}
	figQueued = &apollo.Family{Name: "apollo_queue_changes", Kind: apollo.FigureGauge,
		Help: "Changes waiting for the observers, the holding area included."}
	figHolding = &apollo.Family{Name: "apollo_holding_area_changes", Kind: apollo.FigureGauge,
		Help: "Changes in the holding area: over their task's queue length."}
	figHoldLimit = &apollo.Family{Name: "apollo_holding_area_limit", Kind: apollo.FigureGauge,
		Help: "Changes the holding area takes before events are refused."}
	figOutOfOrder = &apollo.Family{Name: "apollo_out_of_order_waiting", Kind: apollo.FigureGauge,
		Help: "Out-of-order events waiting now for the events before them."}
	figTombstones = &apollo.Family{Name: "apollo_tombstones", Kind: apollo.FigureGauge,
		Help: "Tasks gone from memory whose last sequence is kept to recognise late duplicates."}
	figDeadlines = &apollo.Family{Name: "apollo_deadlines", Kind: apollo.FigureGauge,
		Help: "Timeout, missed-start and reorder deadlines armed."}
	figSubscribers = &apollo.Family{Name: "apollo_bus_subscribers", Kind: apollo.FigureGauge,
		Help: "Subscribers to the bus's changes."}
)

// Figures writes the bus's counters and gauges (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figEvents, float64(s.Accepted), "accepted")
	w.Add(figEvents, float64(s.Duplicate), "duplicate")
	w.Add(figEvents, float64(s.Illegal), "illegal")
	w.Add(figEvents, float64(s.Invalid), "invalid")
	w.Add(figEvents, float64(s.Refused), "refused")
	w.Add(figHeld, float64(s.Held))
	w.Add(figWaiting, float64(s.Parked))
	w.Add(figWaitEnded, float64(s.WaitEnded))
	w.Add(figTimeouts, float64(s.Timeouts))
	w.Add(figMissedStarts, float64(s.MissedStart))
	w.Add(figCorrections, float64(s.Corrections))
	w.Add(figEvicted, float64(s.Evicted))
	w.Add(figLogErrors, float64(s.LogErrors))
	w.Add(figSubscribersCut, float64(s.SubscribersCut))
	w.Add(figTasks, float64(s.Tasks))
	w.Add(figQueues, float64(s.Queues))
	w.Add(figQueued, float64(s.Queued))
	w.Add(figHolding, float64(s.Holding))
	w.Add(figHoldLimit, float64(s.HoldLimit))
	w.Add(figOutOfOrder, float64(s.Waiting))
	w.Add(figTombstones, float64(s.Tombstones))
	w.Add(figDeadlines, float64(s.Deadlines))
	w.Add(figSubscribers, float64(s.Subscribers))
}
