package httpapi

import (
	"net/http"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/stream"
)

// Stream is the live stream (*stream.Hub) that GET /api/v1/stream hands
// its connections to, once the route has authenticated them.
type Stream interface {
	Serve(w http.ResponseWriter, r *http.Request, who stream.Caller) error
}

// stream serves GET /api/v1/stream (docs/stream.md): the hub takes the
// connection as the principal's caller.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if s.opts.Stream == nil {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "the live stream is not enabled on this server"}
	}
	return s.opts.Stream.Serve(w, r, stream.Caller{Name: p.Name, Tenant: p.Tenant, Role: p.Role.String(),
		MayAck: p.Role.Allows(RoleOperator), Remote: r.RemoteAddr})
}

// SystemStats is the body of GET /api/v1/system: every part in
// Options.System (bus, stream, wal, alert, redis, ...), read now, as
// tenant may see it (docs/security.md: counts of every tenant, names of
// its own).
func (s *Server) SystemStats(tenant string) map[string]any {
	out := make(map[string]any, len(s.opts.System)+1)
	for name, f := range s.opts.System {
		out[name] = f(tenant)
	}
	// The refusals of the rate limit happen here, before the bus: the
	// bus's refused does not count them.
	out["rateLimit"] = s.rateLimitStats(tenant)
	return out
}

func (s *Server) system(w http.ResponseWriter, _ *http.Request, p *Principal) error {
	writeJSON(w, http.StatusOK, s.SystemStats(p.Tenant))
	return nil
}

// prometheus serves GET /metrics: Apollo-11's own figures in the
// Prometheus format (package selfmetrics, docs/monitoring.md). Viewers may
// scrape: the numbers are totals over every tenant and carry no job, task
// or tenant name; of the channels, the handler shows those that serve the
// caller's tenant (PrincipalFrom), every one to the default tenant's.
func (s *Server) prometheus(w http.ResponseWriter, r *http.Request, _ *Principal) error {
	if s.opts.Prometheus == nil {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "this process does not export its figures"}
	}
	s.opts.Prometheus.ServeHTTP(w, r)
	return nil
}

// web serves the dashboard (package web) for every path no other route
// claims; without it those paths are 404.
func (s *Server) web(w http.ResponseWriter, r *http.Request, _ *Principal) error {
	if s.opts.Web == nil {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "no such page: " + quoteInput(r.URL.Path)}
	}
	s.opts.Web.ServeHTTP(w, r)
	return nil
}
