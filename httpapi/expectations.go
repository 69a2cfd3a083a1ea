package httpapi

import (
	"context"
	"fmt"
	"mime"
	"net/http"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// Expectations are the tenants' job expectations (docs/expectations.md)
// and the learner's proposals; cmd/apollo fills it.
type Expectations interface {
	// Expectations is the tenant's file as the server holds it.
	Expectations(tenant string) apiclient.Expectations
	// PutExpectations checks src, saves it durably and puts it in force.
	// A file with problems changes nothing: they are returned, each with
	// its place, and the error is nil. ifMatch, when not empty, is the
	// apiclient.FileTag of the file the client edited: the update is
	// refused (apiclient.Changed) when the tenant's file is another one now.
	PutExpectations(ctx context.Context, tenant string, src []byte, ifMatch string) ([]apiclient.RuleProblem, error)
	// Suggestions are the learner's proposals: for job, or for the first
	// limit jobs by name that have one when job is "", with More set when
	// further jobs have one. It stops at the first job past limit that has
	// one; jobs without a proposal before it are still looked at.
	Suggestions(tenant, job string, limit int) apiclient.SuggestionList
	// AcceptSuggestion makes the proposal for job the job's expectation;
	// false when there is none.
	AcceptSuggestion(ctx context.Context, tenant, job string) (bool, error)
}

func (s *Server) expectations() (Expectations, error) {
	if s.opts.Expectations == nil {
		return nil, &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "job expectations are not kept by this process",
			Hint: "ask the all-in-one server (apollo server)"}
	}
	return s.opts.Expectations, nil
}

func (s *Server) getExpectations(w http.ResponseWriter, r *http.Request, p *Principal) error {
	x, err := s.expectations()
	if err != nil {
		return err
	}
	ans := x.Expectations(p.Tenant)
	w.Header().Set("ETag", apiclient.FileTag(ans.Source))
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// putExpectations replaces the tenant's expectations with a whole file.
// With any problem nothing changes, and every problem is answered with
// its place, as for rules.
func (s *Server) putExpectations(w http.ResponseWriter, r *http.Request, p *Principal) error {
	x, err := s.expectations()
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "text/plain" && mt != "application/yaml" && mt != "application/x-yaml" && mt != "text/yaml" {
			return &apollo.Error{Code: apollo.EUNSUPPORTED, Message: fmt.Sprintf("content type %s", quoteInput(ct)),
				Hint: "send the expectations file (YAML) as text/plain or application/yaml"}
		}
	}
	body, err := s.readBody(w, r, hintExpectFile)
	if err != nil {
		return err
	}
	problems, err := x.PutExpectations(r.Context(), p.Tenant, body, r.Header.Get("If-Match"))
	if apollo.ErrorCode(err) == apollo.EPRECONDITION {
		return err
	}
	if err != nil {
		return fmt.Errorf("saving the expectations of tenant %q: %w", p.Tenant, err)
	}
	if len(problems) > 0 {
		writeProblems(w, "expectations", problems, "fix every problem listed in errors, or check the file with apollo expect check")
		return nil
	}
	ans := x.Expectations(p.Tenant)
	s.audit(r, p, "expectations.update", "expectations", fmt.Sprintf("%d expectations", ans.Count))
	w.Header().Set("ETag", apiclient.FileTag(ans.Source))
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// maxSuggestions bounds one answer of the learner's proposals: each is
// worked out from its job's sample when asked, and a tenant may have
// 200 000 jobs.
const maxSuggestions = 1000

func (s *Server) listSuggestions(w http.ResponseWriter, r *http.Request, p *Principal) error {
	x, err := s.expectations()
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", maxSuggestions, 1, maxSuggestions)
	if err != nil {
		return err
	}
	s.settle(r.Context()) // the learner has heard of the runs reported before
	job, err := boundedQuery(r, "job", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	list := x.Suggestions(p.Tenant, job, limit)
	if list.Suggestions == nil {
		list.Suggestions = []apiclient.Suggestion{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) acceptSuggestion(w http.ResponseWriter, r *http.Request, p *Principal) error {
	x, err := s.expectations()
	if err != nil {
		return err
	}
	job := r.PathValue("name")
	s.settle(r.Context())
	ok, err := x.AcceptSuggestion(r.Context(), p.Tenant, job)
	if err != nil {
		return err
	}
	if !ok {
		return &apollo.Error{Code: apollo.ENOTFOUND, Field: "job", Message: fmt.Sprintf("no proposal for job %s", quoteInput(job)),
			Hint: "a proposal needs about 10 runs of the job; list them with apollo expect suggest"}
	}
	ans := x.Expectations(p.Tenant)
	s.audit(r, p, "expectations.accept", job, fmt.Sprintf("the learner's proposal; %d expectations", ans.Count))
	writeJSON(w, http.StatusOK, ans)
	return nil
}
