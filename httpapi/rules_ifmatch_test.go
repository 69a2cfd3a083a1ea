package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rulebook"
)

// GET /api/v1/rules gives the file's version in ETag; a PUT with that
// version in If-Match is refused (412) when the tenant's rules were saved
// meanwhile by someone else, and nothing changes. The other tenant's
// saves are not changes of these. Without If-Match, a PUT replaces the
// rules as before.
func TestPutRulesIfMatch(t *testing.T) {
	t.Parallel()
	agg, _ := metrics.New(metrics.Options{Logger: discardLogger})
	eng, err := alert.New(alert.Options{Store: agg, Sender: discardSender{}, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	auth, secrets := tenantTokens(t, RoleAdmin)
	srv := httptest.NewServer(New(Options{Bus: &nopBus{}, Alerts: eng, Auth: auth, Logger: discardLogger,
		Rules: rulebook.Book{Engine: eng}}))
	defer srv.Close()
	do := func(method, tenant, body, ifMatch string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/rules", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets["admin/"+tenant])
		if method == "PUT" {
			req.Header.Set("Content-Type", "text/plain")
		}
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("ETag"), string(b)
	}
	rule := func(name string) string { return `RULE ` + name + ` task_prefix: "x" ON: failed` + "\n" }

	_, read, _ := do("GET", "a", "", "")
	if read == "" {
		t.Fatal("GET /api/v1/rules: no ETag")
	}
	if st, _, body := do("PUT", "b", rule("b_rule"), ""); st != 200 {
		t.Fatalf("tenant b's PUT: %d %s", st, body)
	}
	st, saved, body := do("PUT", "a", rule("mine"), read)
	if st != 200 || saved == "" || saved == read {
		t.Fatalf("PUT over the version read, after the other tenant's save: %d ETag %s %s", st, saved, body)
	}
	if st, _, body := do("PUT", "a", rule("mine")+rule("carols"), ""); st != 200 { // another admin, no If-Match
		t.Fatalf("PUT without If-Match: %d %s", st, body)
	}
	st, _, body = do("PUT", "a", rule("mine")+rule("mine_too"), saved)
	if st != http.StatusPreconditionFailed || !strings.Contains(body, "changed since you read them") {
		t.Fatalf("PUT over a version saved over since: %d %s, want 412 saying the rules changed", st, body)
	}
	if rs := eng.Rules("a"); len(rs) != 2 || rs[1].Name != "carols" {
		t.Errorf("tenant a's rules after the refused PUT: %v, want mine and carols", rs)
	}
	if _, now, _ := do("GET", "a", "", ""); now == saved || now == read {
		t.Errorf("ETag %s after a save, the same as before", now)
	}
}
