package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/rules"
)

// A PUT /api/v1/rules body without rules removes the tenant's running
// rules only when it says so, with the line "# apollo: empty" or the JSON
// form, as a rules file must on reload; the other tenant's rules are never
// touched. It removed them on an empty body before.
func TestPutRulesWithoutRulesNeedsTheMarker(t *testing.T) {
	t.Parallel()
	agg, _ := metrics.New(metrics.Options{Logger: discardLogger})
	eng, err := alert.New(alert.Options{Store: agg, Sender: discardSender{}, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"a", "b"} {
		rs, err := rules.Parse("", []byte(`RULE `+tenant+`_failed task_prefix: "batch_" ON: failed NOTIFY: ops`))
		if err != nil {
			t.Fatal(err)
		}
		eng.SetRules(tenant, rs)
	}
	var mu sync.Mutex
	saved := map[string]string{}
	auth, secrets := tenantTokens(t, RoleAdmin)
	srv := httptest.NewServer(New(Options{Bus: &nopBus{}, Alerts: eng, Auth: auth, Logger: discardLogger,
		Rules: rulebook.Book{Engine: eng, Known: func(_, name string) bool { return name == "ops" },
			Save: func(tenant string, src []byte) error {
				mu.Lock()
				defer mu.Unlock()
				saved[tenant] = string(src)
				return nil
			}}}))
	defer srv.Close()
	put := func(tenant, ctype, body string) (int, errAnswer) {
		t.Helper()
		h := bearerHeader(secrets["admin/"+tenant])
		h["Content-Type"] = ctype
		st, answer := call(t, "PUT", srv.URL+"/api/v1/rules", body, h)
		var e errAnswer
		if st != 200 && json.Unmarshal([]byte(answer), &e) != nil {
			t.Fatalf("%d %s", st, answer)
		}
		return st, e
	}
	running := func(tenant string) int { return len(eng.Rules(tenant)) }

	for name, body := range map[string]string{"empty": "", "blank": " \n\t\n", "comments only": "# nothing here yet\n"} {
		st, e := put("a", "text/plain", body)
		if st != 400 || e.Error.Code != apollo.EINVALID || e.Error.Field != "rules" ||
			!strings.Contains(e.Error.Message, "no rules, and 1 run now") || !strings.Contains(e.Error.Hint, "# apollo: empty") {
			t.Errorf("%s body: %d %+v, want 400 naming the marker", name, st, e.Error)
		}
	}
	if running("a") != 1 || running("b") != 1 || len(saved) != 0 {
		t.Fatalf("a refused body changed something: a %d, b %d rules, saved %v", running("a"), running("b"), saved)
	}

	// Meant: the tenant's rules go, the other's stay.
	if st, e := put("a", "text/plain", "# apollo: empty\n"); st != 200 {
		t.Fatalf("marked body: %d %+v", st, e.Error)
	}
	if running("a") != 0 || running("b") != 1 || saved["a"] != "# apollo: empty\n" {
		t.Fatalf("after the marked body: a %d, b %d rules, saved %q", running("a"), running("b"), saved)
	}
	// With nothing running, there is nothing to lose.
	if st, e := put("a", "text/plain", ""); st != 200 || running("b") != 1 {
		t.Fatalf("empty body with no rules running: %d %+v", st, e.Error)
	}
	// The JSON form is written whole by a program: it means it.
	if st, e := put("b", "application/json", `{"rules": []}`); st != 200 || running("b") != 0 {
		t.Fatalf("JSON form: %d %+v, b has %d rules", st, e.Error, running("b"))
	}
}
