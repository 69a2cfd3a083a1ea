package httpapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/audit"
)

// memExpectations is an Expectations of texts per tenant: a line "bad"
// is a problem at 2:3.
type memExpectations struct {
	mu   sync.Mutex
	srcs map[string]string
}

func newMemExpectations() *memExpectations { return &memExpectations{srcs: map[string]string{}} }

func (m *memExpectations) Expectations(tenant string) apiclient.Expectations {
	m.mu.Lock()
	defer m.mu.Unlock()
	return apiclient.Expectations{Source: m.srcs[tenant], Count: strings.Count(m.srcs[tenant], "job:")}
}

func (m *memExpectations) PutExpectations(_ context.Context, tenant string, src []byte, _ string) ([]apiclient.RuleProblem, error) {
	if strings.Contains(string(src), "bad") {
		return []apiclient.RuleProblem{{Pos: "2:3", Line: 2, Col: 3, Message: `job "x": every: "bad" is not a duration`}}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.srcs[tenant] = string(src)
	return nil, nil
}

func (m *memExpectations) Suggestions(tenant, job string, limit int) apiclient.SuggestionList {
	return apiclient.SuggestionList{Suggestions: []apiclient.Suggestion{{Job: "job", Describe: "every 5m", Every: "5m0s"}}}
}

func (m *memExpectations) AcceptSuggestion(ctx context.Context, tenant, job string) (bool, error) {
	if job != "job" {
		return false, nil
	}
	_, err := m.PutExpectations(ctx, tenant, []byte("expectations:\n  - job: job\n    every: 5m\n"), "")
	return true, err
}

// Expectations are the caller's tenant's: a file with problems changes
// nothing and answers each with its place; a type other than text or
// YAML is refused; writes need the operator role and are audited; a
// process without expectations answers 503.
func TestExpectationsRoutes(t *testing.T) {
	t.Parallel()
	b, _ := newMeteredBus(t)
	auth, tokens := tenantTokens(t, RoleViewer, RoleOperator)
	x, log := newMemExpectations(), audit.NewMemory(100, nil)
	srv := httptest.NewServer(New(Options{Bus: b, Auth: auth, Audit: log, Expectations: x, Logger: discardLogger}))
	t.Cleanup(srv.Close)
	put := func(tenant, role, ct, body string) (int, string) {
		return call(t, "PUT", srv.URL+"/api/v1/expectations", body, map[string]string{"Authorization": "Bearer " + tokens[role+"/"+tenant], "Content-Type": ct})
	}
	if st, body := put("a", "operator", "application/yaml", "expectations:\n  - job: a1\n"); st != 200 || !strings.Contains(body, `"count":1`) {
		t.Fatalf("%d %s", st, body)
	}
	if st, body := put("b", "operator", "text/plain", "expectations:\n  - job: b1\n  - job: b2\n"); st != 200 || !strings.Contains(body, `"count":2`) {
		t.Fatalf("%d %s", st, body)
	}
	if st, body := put("a", "operator", "text/plain", "expectations:\n  bad\n"); st != 400 || !strings.Contains(body, `"pos":"2:3"`) || !strings.Contains(body, "nothing was changed") {
		t.Fatalf("a file with a problem: %d %s", st, body)
	}
	if st, _ := put("a", "operator", "application/json", "{}"); st != 415 {
		t.Fatalf("JSON: %d, want 415", st)
	}
	if st, _ := put("a", "viewer", "text/plain", ""); st != 403 {
		t.Fatalf("a viewer wrote: %d", st)
	}
	if st, body := callAs(t, "GET", srv.URL+"/api/v1/expectations", tokens["viewer/a"], ""); st != 200 || !strings.Contains(body, "a1") || strings.Contains(body, "b1") {
		t.Fatalf("tenant a reads %d %s", st, body)
	}
	if st, body := callAs(t, "POST", srv.URL+"/api/v1/expectations/suggestions/nope/accept", tokens["operator/b"], ""); st != 404 || !strings.Contains(body, "apollo expect suggest") {
		t.Fatalf("accepting no proposal: %d %s", st, body)
	}
	if st, body := callAs(t, "POST", srv.URL+"/api/v1/expectations/suggestions/job/accept", tokens["operator/b"], ""); st != 200 || !strings.Contains(body, `"count":1`) {
		t.Fatalf("accepting: %d %s", st, body)
	}
	if st, body := callAs(t, "GET", srv.URL+"/api/v1/expectations/suggestions?job=job", tokens["viewer/b"], ""); st != 200 || !strings.Contains(body, `"describe":"every 5m"`) {
		t.Fatalf("suggestions: %d %s", st, body)
	}
	var actions []string
	for _, tenant := range []string{"a", "b"} {
		for _, e := range log.List(tenant, 100) {
			actions = append(actions, e.Tenant+":"+e.Action)
		}
	}
	for _, want := range []string{"a:expectations.update", "b:expectations.update", "b:expectations.accept"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Errorf("no audit entry %s in %v", want, actions)
		}
	}
	none := httptest.NewServer(New(Options{Bus: b, Auth: auth, Logger: discardLogger}))
	t.Cleanup(none.Close)
	if st, _ := callAs(t, "GET", none.URL+"/api/v1/expectations", tokens["viewer/a"], ""); st != 503 {
		t.Fatalf("without expectations: %d, want 503", st)
	}
}
