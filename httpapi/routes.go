package httpapi

import (
	"net/http"
	"strconv"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// routes is the one table of every route, the role it needs and what it
// does (crosssite.go). A route without a role is public on purpose (health
// checks); TestRouteTableDeclaresRoles checks that only those are, and
// TestRouteTableDeclaresEffects that every route other than GET changes.
func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", RoleNone, s.healthz, reads},
		{"GET", "/readyz", RoleNone, s.readyz, reads},

		{"POST", "/api/v1/events", RoleAgent, s.postEvents, changes},
		{"GET", "/ping/{name}", RoleAgent, s.ping, changes},
		{"POST", "/ping/{name}", RoleAgent, s.ping, changes},
		{"GET", "/ping/{name}/{action}", RoleAgent, s.ping, changes},
		{"POST", "/ping/{name}/{action}", RoleAgent, s.ping, changes},

		{"GET", "/api/v1/tasks", RoleViewer, s.listTasks, reads},
		{"GET", "/api/v1/tasks/{id}", RoleViewer, s.getTask, reads},
		{"POST", "/api/v1/tasks/{id}/status", RoleOperator, s.correctTask, changesJSON},

		{"GET", "/api/v1/metrics", RoleViewer, s.listMetrics, reads},
		{"GET", "/api/v1/metrics/{name}", RoleViewer, s.jobMetrics, reads},
		{"GET", "/api/v1/series", RoleViewer, s.prefixSeries, reads},

		{"GET", "/api/v1/notifications", RoleViewer, s.listNotifications, reads},
		{"POST", "/api/v1/channels/{name}/test", RoleOperator, s.testChannel, changes},

		{"GET", "/api/v1/jobs", RoleViewer, s.listJobs, reads},
		{"GET", "/api/v1/jobs/health", RoleViewer, s.jobsHealth, reads},
		{"POST", "/api/v1/jobs/{name}/run", RoleOperator, s.jobAction("run"), changes},
		{"POST", "/api/v1/jobs/{name}/pause", RoleOperator, s.jobAction("pause"), changes},
		{"POST", "/api/v1/jobs/{name}/resume", RoleOperator, s.jobAction("resume"), changes},

		{"GET", "/api/v1/alerts", RoleViewer, s.listAlerts, reads},
		{"POST", "/api/v1/alerts/{id}/ack", RoleOperator, s.ackAlert, changes},
		{"GET", "/api/v1/silences", RoleViewer, s.listSilences, reads},
		{"POST", "/api/v1/silences", RoleOperator, s.addSilence, changesJSON},
		{"DELETE", "/api/v1/silences/{id}", RoleOperator, s.removeSilence, changes},
		{"GET", "/api/v1/rules", RoleViewer, s.getRules, reads},
		{"PUT", "/api/v1/rules", RoleAdmin, s.putRules, changes}, // text/plain is a rules file; putRules checks the type
		{"GET", "/api/v1/expectations", RoleViewer, s.getExpectations, reads},
		{"PUT", "/api/v1/expectations", RoleOperator, s.putExpectations, changes}, // a YAML file; putExpectations checks the type
		{"GET", "/api/v1/expectations/suggestions", RoleViewer, s.listSuggestions, reads},
		{"POST", "/api/v1/expectations/suggestions/{name}/accept", RoleOperator, s.acceptSuggestion, changes},

		{"GET", "/api/v1/audit", RoleAdmin, s.listAudit, reads},

		// The stream changes things too (acks), but a browser always sends
		// Origin on a WebSocket, and the hub refuses other origins.
		{"GET", "/api/v1/stream", RoleViewer, s.stream, reads},
		{"GET", "/api/v1/system", RoleViewer, s.system, reads},
		{"GET", "/metrics", RoleViewer, s.prometheus, reads},
		{"GET", "/metrics/jobs", RoleViewer, s.jobExposition, reads},
		{"GET", "/", RoleNone, s.web, reads},
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ *Principal) error {
	writeJSON(w, http.StatusOK, apiclient.Health{Status: "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request, _ *Principal) error {
	if s.opts.Ready != nil && !s.opts.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, apiclient.Health{Status: "recovering"})
		return nil
	}
	if s.opts.Unavailable != nil {
		if err := s.opts.Unavailable(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, apiclient.Health{Status: "unavailable", Reason: err.Error()})
			return nil
		}
	}
	writeJSON(w, http.StatusOK, apiclient.Health{Status: "ready"})
	return nil
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, p *Principal) error {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000 {
			return &apollo.Error{Code: apollo.EINVALID, Field: "limit", Message: "must be a number from 1 to 10000"}
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": s.opts.Audit.List(p.Tenant, limit)})
	return nil
}
