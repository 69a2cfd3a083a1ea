package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// ChannelTester sends a test message through a channel as a tenant
// (notify.Dispatcher.TestFor): only a channel that serves the tenant is
// found. The Deliveries of a process that sends notifications is one.
type ChannelTester interface {
	TestFor(ctx context.Context, tenant, channel string) (apollo.Attempt, error)
}

// testChannel answers POST /api/v1/channels/{name}/test: one test message
// through the channel now, recorded in the tenant's delivery record and
// in the audit log. A channel that fails is still a 200 answer, whose
// attempt says so; a channel the tenant may not use is 404.
func (s *Server) testChannel(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ct, ok := s.opts.Deliveries.(ChannelTester)
	if !ok {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "this process sends no notifications",
			Hint: "ask the all-in-one server; in the three-process mode run apollo notify test NAME --config apollo.yaml where an alert process runs"}
	}
	name, err := boundedPath(r, "name", "channel", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	a, err := ct.TestFor(r.Context(), p.Tenant, name)
	if a.ID == "" { // nothing was tried: no such channel, for this tenant
		return err
	}
	detail := a.Outcome + " in " + a.Latency.Round(time.Millisecond).String()
	if a.Error != "" {
		detail += ": " + a.Error
	}
	s.audit(r, p, "channel.test", name, strings.TrimSpace(detail))
	writeJSON(w, http.StatusOK, apiclient.ChannelTest{Attempt: a})
	return nil
}
