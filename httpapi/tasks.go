package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, p *Principal) error {
	q := r.URL.Query()
	prefix, err := boundedQuery(r, "prefix", max(apollo.MaxTaskIDBytes, apollo.MaxNameBytes))
	if err != nil {
		return err
	}
	f := apollo.TaskFilter{Tenant: p.Tenant, Prefix: prefix, Cursor: q.Get("cursor")}
	if v := q.Get("status"); v != "" {
		st, err := apollo.ParseStatus(v)
		if err != nil { // its message quotes v whole
			return &apollo.Error{Code: apollo.EINVALID, Field: "status", Message: "unknown status " + quoteInput(v), Hint: apiError(err).Hint}
		}
		f.Status = st
	}
	for _, x := range []struct {
		name string
		dst  *int64
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(x.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return &apollo.Error{Code: apollo.EINVALID, Field: x.name, Message: "not a time in Unix milliseconds: " + quoteInput(v)}
			}
			*x.dst = n
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return &apollo.Error{Code: apollo.EINVALID, Field: "limit", Message: "must be a number from 1 to 1000"}
		}
		f.Limit = n
	}
	tasks, next, err := s.opts.Bus.List(f)
	if err != nil {
		return err
	}
	if tasks == nil {
		tasks = []apollo.Task{}
	}
	writeJSON(w, http.StatusOK, apiclient.TaskPage{Tasks: tasks, Next: next})
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id, err := boundedPath(r, "id", "taskID", apollo.MaxTaskIDBytes)
	if err != nil {
		return err
	}
	t, err := s.opts.Bus.Get(p.Tenant, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) correctTask(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id, err := boundedPath(r, "id", "taskID", apollo.MaxTaskIDBytes)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, hintCorrection)
	if err != nil {
		return err
	}
	var c apiclient.Correction
	if err := json.Unmarshal(body, &c); err != nil {
		if ae, ok := err.(*apollo.Error); ok {
			return ae
		}
		return &apollo.Error{Code: apollo.EINVALID, Message: "the body must be {\"status\": ..., \"reason\": ...}: " + err.Error()}
	}
	t, err := s.opts.Bus.Correct(r.Context(), p.Tenant, id, c.Status, p.Name, c.Reason)
	if err != nil {
		return err
	}
	s.audit(r, p, "task.correct", id, "status "+c.Status.String()+": "+c.Reason)
	writeJSON(w, http.StatusOK, t)
	return nil
}
