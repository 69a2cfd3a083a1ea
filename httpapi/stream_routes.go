package httpapi

import (
	"net/http"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// stream serves GET /api/v1/stream (docs/stream.md).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if s.opts.Stream == nil {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "the live stream is not enabled on this server"}
	}
	return s.opts.Stream.serve(w, r, p)
}

// SystemStats is the body of GET /api/v1/system: the bus's counters, the
// stream's, and every part in Options.System (wal, alert, redis, ...).
func (s *Server) SystemStats() map[string]any {
	out := map[string]any{}
	if b, ok := s.opts.Bus.(interface{ Stats() bus.Stats }); ok {
		out["bus"] = b.Stats()
	}
	if s.opts.Stream != nil {
		out["stream"] = s.opts.Stream.Stats()
	}
	m := &s.opts.Monitored // the components /metrics reports, by the same names
	if present(m.WAL) {
		out["wal"] = m.WAL.Stats()
	}
	if present(m.Metrics) {
		out["metrics"] = m.Metrics.Stats()
	}
	if present(m.Notifications) {
		out["notifications"] = m.Notifications.Stats()
	}
	if present(m.Alerts) {
		out["alert"] = m.Alerts.Stats()
	}
	if present(m.Scheduler) {
		out["scheduler"] = m.Scheduler.Stats()
	}
	if present(m.Redis) {
		out["redis"] = m.Redis.Stats()
	}
	if m.Recovery != nil {
		out["recovery"] = map[string]any{"seconds": m.Recovery.Duration.Seconds(), "events": m.Recovery.Events}
	}
	for name, f := range s.opts.System {
		out[name] = f()
	}
	return out
}

func (s *Server) system(w http.ResponseWriter, _ *http.Request, _ *Principal) error {
	writeJSON(w, http.StatusOK, s.SystemStats())
	return nil
}

// web serves the dashboard (package web) for every path no other route
// claims; without it those paths are 404.
func (s *Server) web(w http.ResponseWriter, r *http.Request, _ *Principal) error {
	if s.opts.Web == nil {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "no such page: " + r.URL.Path}
	}
	s.opts.Web.ServeHTTP(w, r)
	return nil
}
