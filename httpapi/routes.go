package httpapi

import (
	"net/http"
	"strconv"

	"github.com/apollo-11/apollo"
)

// routes is the one table of every route and the role it needs. A route
// without a role is public on purpose (health checks); TestRouteTable
// checks that only those are.
func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", RoleNone, s.healthz},
		{"GET", "/readyz", RoleNone, s.readyz},

		{"POST", "/api/v1/events", RoleAgent, s.postEvents},
		{"GET", "/ping/{name}", RoleAgent, s.ping},
		{"POST", "/ping/{name}", RoleAgent, s.ping},
		{"GET", "/ping/{name}/{action}", RoleAgent, s.ping},
		{"POST", "/ping/{name}/{action}", RoleAgent, s.ping},

		{"GET", "/api/v1/tasks", RoleViewer, s.listTasks},
		{"GET", "/api/v1/tasks/{id}", RoleViewer, s.getTask},
		{"POST", "/api/v1/tasks/{id}/status", RoleOperator, s.correctTask},

		{"GET", "/api/v1/metrics", RoleViewer, s.listMetrics},
		{"GET", "/api/v1/metrics/{name}", RoleViewer, s.jobMetrics},

		{"GET", "/api/v1/notifications", RoleViewer, s.listNotifications},

		{"GET", "/api/v1/jobs", RoleViewer, s.listJobs},
		{"POST", "/api/v1/jobs/{name}/run", RoleOperator, s.jobAction("run")},
		{"POST", "/api/v1/jobs/{name}/pause", RoleOperator, s.jobAction("pause")},
		{"POST", "/api/v1/jobs/{name}/resume", RoleOperator, s.jobAction("resume")},

		{"GET", "/api/v1/alerts", RoleViewer, s.listAlerts},
		{"POST", "/api/v1/alerts/{id}/ack", RoleOperator, s.ackAlert},
		{"GET", "/api/v1/silences", RoleViewer, s.listSilences},
		{"POST", "/api/v1/silences", RoleOperator, s.addSilence},
		{"DELETE", "/api/v1/silences/{id}", RoleOperator, s.removeSilence},
		{"GET", "/api/v1/rules", RoleViewer, s.getRules},
		{"PUT", "/api/v1/rules", RoleAdmin, s.putRules},

		{"GET", "/api/v1/audit", RoleAdmin, s.listAudit},

		{"GET", "/api/v1/stream", RoleViewer, s.stream},
		{"GET", "/api/v1/system", RoleViewer, s.system},
		{"GET", "/metrics", RoleViewer, s.prometheus},
		{"GET", "/", RoleNone, s.web},
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ *Principal) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request, _ *Principal) error {
	if s.opts.Ready != nil && !s.opts.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "recovering"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
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
