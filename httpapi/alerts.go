package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// AlertEngine is what the API needs of the alert engine (alert.Engine,
// asserted in cmd/apollo):
// alerts, acks and silences, always of one tenant.
type AlertEngine interface {
	Alerts(tenant string, state apollo.AlertState) []apollo.Alert
	Ack(ctx context.Context, tenant, id, by string) error
	Silences(tenant string) []apollo.Silence
	AddSilence(tenant string, s apollo.Silence) (apollo.Silence, error)
	RemoveSilence(tenant, id string) error
}

// RuleBook is the tenants' alert rules as the API reads and replaces them
// (rulebook.Book over the engine of the mode, filled by cmd/apollo).
type RuleBook interface {
	// Rules are the tenant's rules and the file they came from.
	Rules(tenant string) (apiclient.RuleSet, error)
	// PutRules checks src, saves it durably and puts it in force. A file
	// with problems changes nothing: they are returned, each with its
	// place, and the error is nil. ifMatch, when not empty, is the
	// apiclient.FileTag of the file the client edited: the update is refused
	// (EPRECONDITION, 412) when the tenant's file is another one now.
	PutRules(ctx context.Context, tenant string, src []byte, ifMatch string) (apiclient.RuleSet, []apiclient.RuleProblem, error)
}

// alertReader is an AlertEngine whose alerts and silences live
// elsewhere (redisstore.RemoteAlerts: in Redis, for the bus of the three
// processes) and may not be readable now: a list it cannot read is
// answered with its error, not as an empty list.
type alertReader interface {
	ReadAlerts(tenant string, state apollo.AlertState) ([]apollo.Alert, []apollo.Silence, error)
}

// readAlerts are a tenant's alerts in a state ("" = all) and its
// silences.
func readAlerts(eng AlertEngine, tenant string, state apollo.AlertState) ([]apollo.Alert, []apollo.Silence, error) {
	if r, ok := eng.(alertReader); ok {
		return r.ReadAlerts(tenant, state)
	}
	return eng.Alerts(tenant, state), eng.Silences(tenant), nil
}

// alerting returns the engine, or the error that says there is none.
func (s *Server) alerting() (AlertEngine, error) {
	if s.opts.Alerts == nil {
		return nil, s.noAlerting()
	}
	return s.opts.Alerts, nil
}

// noAlerting is the answer of the alert and rules routes in a process
// without alerting.
func (s *Server) noAlerting() error {
	return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "alerting is not running on this server",
		Hint: cmp.Or(s.opts.NoAlertingHint, "start apollo server (or apollo alert) with alerting")}
}

// maxAlertRows bounds the alerts of one answer of GET /api/v1/alerts.
const maxAlertRows = 10_000

func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request, p *Principal) error {
	eng, err := s.alerting()
	if err != nil {
		return err
	}
	state := apollo.AlertState(r.URL.Query().Get("state"))
	switch state {
	case "", apollo.AlertInactive, apollo.AlertPending, apollo.AlertFiring, apollo.AlertResolved:
	default:
		return &apollo.Error{Code: apollo.EINVALID, Field: "state", Message: fmt.Sprintf("unknown state %s", quoteInput(string(state))),
			Hint: "use pending, firing or resolved, or leave it out for all"}
	}
	limit, err := intParam(r, "limit", maxAlertRows, 1, maxAlertRows)
	if err != nil {
		return err
	}
	as, sils, err := readAlerts(eng, p.Tenant, state)
	if err != nil {
		return err
	}
	// The first limit of the order the engine lists them in (the bus of
	// the three processes reads them from Redis in the order they were
	// saved) are the ones to show, and only they are matched with the
	// silences.
	slices.SortFunc(as, alertOrder)
	writeJSON(w, http.StatusOK, apiclient.AlertList{Alerts: s.views(sils, as[:min(len(as), limit)]), Total: len(as)})
	return nil
}

// alertOrder is the order of alert.Engine.Alerts: firing, then pending,
// then the rest; newest first; by ID.
func alertOrder(a, b apollo.Alert) int {
	rank := func(s apollo.AlertState) int {
		switch s {
		case apollo.AlertFiring:
			return 0
		case apollo.AlertPending:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a.State), rank(b.State)), b.StartedAt.Compare(a.StartedAt), strings.Compare(a.ID, b.ID))
}

// views are alerts as the API shows them: with the silences (of their
// tenant) that hold their notifications back.
func (s *Server) views(sils []apollo.Silence, as []apollo.Alert) []apiclient.Alert {
	now := s.now()
	out := make([]apiclient.Alert, len(as))
	for i := range as {
		out[i].Alert = as[i]
		if as[i].State == apollo.AlertResolved {
			continue
		}
		for j := range sils {
			if sils[j].Active(now) && sils[j].Matches(&as[i]) {
				out[i].SilencedBy = append(out[i].SilencedBy, sils[j].ID)
			}
		}
	}
	return out
}

func (s *Server) ackAlert(w http.ResponseWriter, r *http.Request, p *Principal) error {
	eng, err := s.alerting()
	if err != nil {
		return err
	}
	id, err := boundedPath(r, "id", "id", maxIDBytes)
	if err != nil {
		return err
	}
	if err := eng.Ack(r.Context(), p.Tenant, id, p.Name); err != nil {
		return err
	}
	s.audit(r, p, "alert.ack", id, "")
	as, sils, err := readAlerts(eng, p.Tenant, "")
	if err != nil { // acknowledged: the answer says so without the alert
		s.log.Warn("reading the alert just acknowledged", "tenant", p.Tenant, "id", id, "err", err)
	}
	for _, a := range as {
		if a.ID == id {
			writeJSON(w, http.StatusOK, apiclient.AckAnswer{Alert: s.views(sils, []apollo.Alert{a})[0]})
			return nil
		}
	}
	writeJSON(w, http.StatusOK, apiclient.AckAnswer{Alert: apiclient.Alert{Alert: apollo.Alert{ID: id}}}) // resolved and forgotten meanwhile
	return nil
}

func (s *Server) listSilences(w http.ResponseWriter, r *http.Request, p *Principal) error {
	eng, err := s.alerting()
	if err != nil {
		return err
	}
	var sils []apollo.Silence
	if r, ok := eng.(alertReader); ok {
		if _, sils, err = r.ReadAlerts(p.Tenant, apollo.AlertInactive); err != nil {
			return err
		}
	} else {
		sils = eng.Silences(p.Tenant)
	}
	if sils == nil {
		sils = []apollo.Silence{}
	}
	writeJSON(w, http.StatusOK, apiclient.SilenceList{Silences: sils})
	return nil
}

// decodeSilence reads a silence from a request body: every field known,
// and exactly one of endsAt and duration (a zero time is none). The engine
// checks the rest.
func decodeSilence(body []byte, now time.Time) (apollo.Silence, error) {
	var b apiclient.SilenceRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return apollo.Silence{}, &apollo.Error{Code: apollo.EINVALID, Message: "the body is not a silence: " + jsonProblem(err),
			Hint: `send {"rule"|"group"|"prefix"|"labels", "duration": "2h" or "endsAt": "2030-01-01T12:00:00Z", "comment"}`}
	}
	if dec.More() {
		return apollo.Silence{}, &apollo.Error{Code: apollo.EINVALID, Message: "more than one JSON value in the body", Hint: "send one silence per request"}
	}
	sil := apollo.Silence{Rule: b.Rule, Group: b.Group, Prefix: b.Prefix, Labels: b.Labels, Comment: b.Comment, StartsAt: b.StartsAt}
	switch {
	case !b.EndsAt.IsZero() && b.Duration != "":
		return apollo.Silence{}, &apollo.Error{Code: apollo.EINVALID, Field: "duration", Message: "both endsAt and duration given", Hint: "give one of them"}
	case !b.EndsAt.IsZero():
		sil.EndsAt = b.EndsAt
	case b.Duration != "":
		d, err := time.ParseDuration(b.Duration)
		if err != nil || d <= 0 {
			return apollo.Silence{}, &apollo.Error{Code: apollo.EINVALID, Field: "duration", Message: fmt.Sprintf("%s is not a positive duration", quoteInput(b.Duration)),
				Hint: "write e.g. 30m, 2h or 72h"}
		}
		start := sil.StartsAt
		if start.IsZero() {
			start = now
		}
		sil.EndsAt = start.Add(d)
	default:
		return apollo.Silence{}, &apollo.Error{Code: apollo.EINVALID, Field: "endsAt", Message: "missing", Hint: `give "duration": "2h" or an "endsAt" time`}
	}
	return sil, nil
}

// jsonProblem says what encoding/json found, without quoting the body.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s must be %s", te.Field, te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
		return "unknown field " + quoteInput(name)
	}
	return quoteInput(err.Error())
}

func (s *Server) addSilence(w http.ResponseWriter, r *http.Request, p *Principal) error {
	eng, err := s.alerting()
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, hintSilence)
	if err != nil {
		return err
	}
	sil, err := decodeSilence(body, s.now())
	if err != nil {
		return err
	}
	sil.CreatedBy = p.Name
	sil, err = eng.AddSilence(p.Tenant, sil)
	if err != nil {
		return err
	}
	s.audit(r, p, "silence.add", sil.ID, describeSilence(sil))
	writeJSON(w, http.StatusCreated, apiclient.SilenceAnswer{Silence: sil})
	return nil
}

func describeSilence(s apollo.Silence) string {
	var parts []string
	if s.Rule != "" {
		parts = append(parts, "rule "+s.Rule)
	}
	if s.Prefix != "" {
		parts = append(parts, "prefix "+s.Prefix)
	}
	for k, v := range s.Labels {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ", ") + " until " + s.EndsAt.UTC().Format(time.RFC3339) + ": " + s.Comment
}

func (s *Server) removeSilence(w http.ResponseWriter, r *http.Request, p *Principal) error {
	eng, err := s.alerting()
	if err != nil {
		return err
	}
	id, err := boundedPath(r, "id", "id", maxIDBytes)
	if err != nil {
		return err
	}
	if err := eng.RemoveSilence(p.Tenant, id); err != nil {
		return err
	}
	s.audit(r, p, "silence.remove", id, "")
	writeJSON(w, http.StatusOK, apiclient.Removed{Removed: id})
	return nil
}

// ruleBook returns the rules, or the error that says there are none.
func (s *Server) ruleBook() (RuleBook, error) {
	if s.opts.Rules == nil {
		return nil, s.noAlerting()
	}
	return s.opts.Rules, nil
}

func (s *Server) getRules(w http.ResponseWriter, r *http.Request, p *Principal) error {
	book, err := s.ruleBook()
	if err != nil {
		return err
	}
	set, err := book.Rules(p.Tenant)
	if err != nil {
		return err
	}
	// The version read, for an editor to send back in If-Match.
	w.Header().Set("ETag", apiclient.FileTag(set.Source))
	writeJSON(w, http.StatusOK, set)
	return nil
}

// putRules replaces the tenant's rules with a whole rules file, text or
// JSON (RuleBook.PutRules): with any problem, nothing changes and every
// problem is answered with its place.
func (s *Server) putRules(w http.ResponseWriter, r *http.Request, p *Principal) error {
	book, err := s.ruleBook()
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "text/plain" && mt != "application/json" {
			return &apollo.Error{Code: apollo.EUNSUPPORTED, Message: fmt.Sprintf("content type %s", quoteInput(ct)),
				Hint: "send the rules file as text/plain, or its JSON form as application/json"}
		}
	}
	body, err := s.readBody(w, r, hintRulesFile)
	if err != nil {
		return err
	}
	set, problems, err := book.PutRules(r.Context(), p.Tenant, body, r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		writeProblems(w, "rules", problems, "fix every problem listed in errors, or check the file with apollo rules check")
		return nil
	}
	nEvent := 0
	for _, r := range set.Rules {
		if r.Kind == "event" {
			nEvent++
		}
	}
	s.audit(r, p, "rules.update", "rules", fmt.Sprintf("%d rules (%d rate, %d event)", len(set.Rules), len(set.Rules)-nEvent, nEvent))
	w.Header().Set("ETag", apiclient.FileTag(set.Source))
	writeJSON(w, http.StatusOK, set)
	return nil
}

// maxListedProblems bounds the problems an answer lists. A 4 MiB file can
// hold hundreds of thousands (an expectations file of one entry repeated
// by a YAML alias: 580 000), and listing each made an answer of 79 MB,
// built in memory, for one request.
const maxListedProblems = 100

// writeProblems answers a file (rules, expectations) refused for its
// problems: how many there are (in total, too, when not all are listed),
// and the first maxListedProblems of them.
func writeProblems(w http.ResponseWriter, what string, problems []apiclient.RuleProblem, hint string) {
	msg := fmt.Sprintf("the %s have %d problem(s); nothing was changed", what, len(problems))
	total := 0
	if len(problems) > maxListedProblems {
		msg += fmt.Sprintf("; the first %d are listed", maxListedProblems)
		total, problems = len(problems), problems[:maxListedProblems]
	}
	writeJSON(w, http.StatusBadRequest, apiclient.ErrorBody{
		Error:  &apollo.Error{Code: apollo.EINVALID, Message: msg, Hint: hint},
		Errors: problems,
		Total:  total,
	})
}
