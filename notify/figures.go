package notify

import "github.com/apollo-11/apollo"

// The notification lanes' figures for GET /metrics (docs/monitoring.md
// describes each).
var (
	figOutcomes = &apollo.Family{Name: "apollo_notifications_total", Kind: apollo.FigureCounter, Labels: []string{"channel", "outcome"},
		Help: "Delivery outcomes by channel: sent, failed (not retried), retrying, gave_up, dropped (never tried), coalesced (folded into a digest)."}
	figQueued = &apollo.Family{Name: "apollo_notifications_queued_total", Kind: apollo.FigureCounter, Labels: []string{"channel"},
		Help: "Notifications accepted into a channel's queue."}
	figWaiting = &apollo.Family{Name: "apollo_notifications_waiting", Kind: apollo.FigureGauge, Labels: []string{"channel"},
		Help: "Notifications waiting in a channel's queue now."}
	figUnknownChannel = &apollo.Family{Name: "apollo_notifications_unknown_channel_total", Kind: apollo.FigureCounter,
		Help: "Notifications dropped because they named a channel that is not configured."}
	figOutboxFailures = &apollo.Family{Name: "apollo_notifications_outbox_failures_total", Kind: apollo.FigureCounter,
		Help: "Outbox writes that failed: notifications sent without being recorded first (a crash before they leave loses them), and deliveries not recorded (a restart may send them again)."}
)

// Figures writes the dispatcher's counters and gauges, per channel
// (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	for name, c := range s.Channels {
		w.Add(figOutcomes, float64(c.Sent), name, OutcomeSent)
		w.Add(figOutcomes, float64(c.Failed), name, OutcomeFailed)
		w.Add(figOutcomes, float64(c.Retried), name, OutcomeRetrying)
		w.Add(figOutcomes, float64(c.GaveUp), name, OutcomeGaveUp)
		w.Add(figOutcomes, float64(c.Dropped), name, OutcomeDropped)
		w.Add(figOutcomes, float64(c.Coalesced), name, OutcomeCoalesced)
		w.Add(figQueued, float64(c.Queued), name)
		w.Add(figWaiting, float64(c.QueueLen), name)
	}
	w.Add(figUnknownChannel, float64(s.UnknownChannel))
	w.Add(figOutboxFailures, float64(s.OutboxFailures))
}
