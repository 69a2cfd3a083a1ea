package httpapi

import (
	"net/http"
	"strconv"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// Deliveries is the delivery record the API shows (notify.Dispatcher).
type Deliveries interface {
	Attempts(f apollo.AttemptFilter) []apollo.Attempt
}

func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if s.opts.Deliveries == nil {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "this process sends no notifications", Hint: "ask the alert process or the all-in-one server"}
	}
	q := r.URL.Query()
	f := apollo.AttemptFilter{Tenant: p.Tenant, Channel: q.Get("channel"), AlertID: q.Get("alert"), Limit: 100}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000 {
			return &apollo.Error{Code: apollo.EINVALID, Field: "limit", Message: "must be a number from 1 to 10000"}
		}
		f.Limit = n
	}
	attempts := s.opts.Deliveries.Attempts(f)
	if attempts == nil {
		attempts = []apollo.Attempt{}
	}
	writeJSON(w, http.StatusOK, apiclient.AttemptList{Attempts: attempts})
	return nil
}
