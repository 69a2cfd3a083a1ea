package stream

import "github.com/apollo-11/apollo"

// The stream's figures for GET /metrics (docs/monitoring.md describes each).
var (
	figClients = &apollo.Family{Name: "apollo_stream_clients", Kind: apollo.FigureGauge,
		Help: "WebSocket clients of GET /api/v1/stream connected now."}
	figGroups = &apollo.Family{Name: "apollo_stream_groups", Kind: apollo.FigureGauge,
		Help: "Distinct subscriptions (tenant and filter) the stream serves now."}
	figChanges = &apollo.Family{Name: "apollo_stream_changes_total", Kind: apollo.FigureCounter,
		Help: "Changes the stream received from the bus."}
	figMessages = &apollo.Family{Name: "apollo_stream_messages_total", Kind: apollo.FigureCounter,
		Help: "Messages written to stream clients."}
	figResyncs = &apollo.Family{Name: "apollo_stream_resyncs_total", Kind: apollo.FigureCounter,
		Help: "Times the bus cut the stream off for being slow; every client resynchronised from a snapshot."}
	figAlertsLost = &apollo.Family{Name: "apollo_stream_alerts_lost_total", Kind: apollo.FigureCounter,
		Help: "Times the alert source dropped the stream for falling behind (an alert storm); every client that wants alerts read them again."}
	figAlertsCut = &apollo.Family{Name: "apollo_stream_alerts_cut_total", Kind: apollo.FigureCounter,
		Help: "Times a client's queued alert messages passed its queue's limit (an alert storm) and were replaced by one alerts_lost; the client read the alerts again."}
	figSnapshots = &apollo.Family{Name: "apollo_stream_snapshots_total", Kind: apollo.FigureCounter,
		Help: "Snapshots sent to stream clients."}
	figResumes = &apollo.Family{Name: "apollo_stream_resumes_total", Kind: apollo.FigureCounter,
		Help: "Subscriptions resumed from the stream's ring buffer without a snapshot."}
	figConnections = &apollo.Family{Name: "apollo_stream_connections_total", Kind: apollo.FigureCounter, Labels: []string{"result"},
		Help: "WebSocket connections, by result: accepted, refused (shutting down, origin not allowed), or over_limit (too many streams open)."}
	figClosed = &apollo.Family{Name: "apollo_stream_closed_total", Kind: apollo.FigureCounter, Labels: []string{"reason"},
		Help: "Stream clients closed by the server, by reason: too_slow (fell behind and were dropped), no_pong, shutdown."}
)

// Figures writes the hub's counters and gauges (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figClients, float64(s.Clients))
	w.Add(figGroups, float64(s.Groups))
	w.Add(figChanges, float64(s.Changes))
	w.Add(figMessages, float64(s.Messages))
	w.Add(figResyncs, float64(s.Resyncs))
	w.Add(figAlertsLost, float64(s.AlertsLost))
	w.Add(figAlertsCut, float64(s.AlertsCut))
	w.Add(figSnapshots, float64(s.Snapshots))
	w.Add(figResumes, float64(s.Resumes))
	w.Add(figConnections, float64(s.Accepted), "accepted")
	w.Add(figConnections, float64(s.Refused), "refused")
	w.Add(figConnections, float64(s.OverLimit), "over_limit")
	w.Add(figClosed, float64(s.ClosedSlow), "too_slow")
	w.Add(figClosed, float64(s.ClosedNoPong), "no_pong")
	w.Add(figClosed, float64(s.ClosedShutdown), "shutdown")
}
