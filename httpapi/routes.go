package httpapi

import "net/http"

// routes is the one table of every route and the role it needs. A route
// without a role is public on purpose (health checks); TestRouteTable
// checks that only those are.
func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", RoleNone, s.healthz},
		{"GET", "/readyz", RoleNone, s.readyz},

		{"POST", "/api/v1/events", RoleAgent, s.postEvents},

		{"GET", "/api/v1/tasks", RoleViewer, s.listTasks},
		{"GET", "/api/v1/tasks/{id}", RoleViewer, s.getTask},
		{"POST", "/api/v1/tasks/{id}/status", RoleOperator, s.correctTask},

		{"GET", "/api/v1/stream", RoleViewer, s.stream},
		{"GET", "/api/v1/system", RoleViewer, s.system},
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
