package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
)

// auditServer is a server with an admin token in tenants a and b and in
// the default tenant, auditing to dir.
type auditServer struct {
	srv    *httptest.Server
	log    *audit.Log
	tokens map[string]string // tenant -> admin secret
}

// adminTokens makes an admin token in tenants a, b and the default one.
func adminTokens(t *testing.T) (map[string]string, []Token) {
	t.Helper()
	secrets := map[string]string{}
	var toks []Token
	for _, tenant := range []string{"a", "b", ""} {
		secret, tok, err := NewToken("admin-"+tenant, RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		toks = append(toks, tok)
	}
	return secrets, toks
}

func newAuditServer(t *testing.T, b *bus.Bus, dir string, secrets map[string]string, toks []Token) *auditServer {
	t.Helper()
	// A clock that stands still: the flood falls in one failure interval
	// however long the machine takes to send it (a real minute's boundary
	// inside the flood made two entries under load).
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC))
	l, err := audit.Open(audit.Options{Dir: filepath.Join(dir, "audit"), Entries: 100, Logger: discardLogger, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Bus: b, Auth: NewTokenAuth(toks), Audit: l, Logger: discardLogger}))
	return &auditServer{srv: srv, log: l, tokens: secrets}
}

func (as *auditServer) close() {
	as.srv.Close()
	as.log.Close()
}

func (as *auditServer) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	return callAs(t, method, as.srv.URL+path, token, body)
}

func (as *auditServer) audit(t *testing.T, tenant string) []audit.Entry {
	t.Helper()
	st, body := as.do(t, "GET", "/api/v1/audit?limit=1000", as.tokens[tenant], "")
	var out struct{ Entries []audit.Entry }
	if err := json.Unmarshal([]byte(body), &out); st != 200 || err != nil {
		t.Fatalf("GET /api/v1/audit as tenant %q: %d %s", tenant, st, body)
	}
	return out.Entries
}

// TestAuditFloodWithoutToken is issue 16.3 over HTTP: callers with a wrong
// token send requests with 60 KB paths. Every one is answered 401; the
// audit file stays small; each tenant's admin still sees its own entries
// (before and after a restart); the default tenant's admin sees the flood
// as one entry per source with its count.
func TestAuditFloodWithoutToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := bus.New(bus.Options{Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	secrets, toks := adminTokens(t)
	as := newAuditServer(t, b, dir, secrets, toks)
	for _, tenant := range []string{"a", "b"} {
		tok := as.tokens[tenant]
		if st, body := as.do(t, "POST", "/api/v1/events", tok, `{"taskID":"run-`+tenant+`","sequence":1,"status":"running","ts":1764400000000}`); st != 200 {
			t.Fatalf("seeding tenant %s: %d %s", tenant, st, body)
		}
		if st, body := as.do(t, "POST", "/api/v1/tasks/run-"+tenant+"/status", tok, `{"status":"success","reason":"checked `+tenant+`"}`); st != 200 {
			t.Fatalf("correcting in tenant %s: %d %s", tenant, st, body)
		}
	}

	const flood = 500
	path := "/api/v1/tasks/" + strings.Repeat("x", 60<<10)
	var wg sync.WaitGroup
	statuses := make(chan int, flood)
	for w := range 4 {
		wg.Go(func() {
			for range flood / 4 {
				req, _ := http.NewRequest("GET", as.srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer apl_wrong"+fmt.Sprint(w))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses <- resp.StatusCode
			}
		})
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != 401 {
			t.Fatalf("a request with a wrong token got %d", st)
		}
	}

	check := func(when string) {
		t.Helper()
		for _, tenant := range []string{"a", "b"} {
			got := as.audit(t, tenant)
			if len(got) != 1 || got[0].Action != "task.correct" || got[0].Target != "run-"+tenant {
				t.Errorf("%s: tenant %s's admin sees %+v, want its one correction", when, tenant, got)
			}
		}
		got := as.audit(t, "")
		if len(got) != 1 || got[0].Action != "auth.fail" || got[0].Count != flood || got[0].Remote != "127.0.0.1" ||
			got[0].Detail != "unknown token" || len(got[0].Target) > 1024 {
			t.Errorf("%s: the default tenant's admin sees %d entries %+v; want one auth.fail from 127.0.0.1 counting %d",
				when, len(got), got, flood)
		}
	}
	check("after the flood")
	as.close()
	var files int64
	ents, _ := os.ReadDir(filepath.Join(dir, "audit"))
	for _, e := range ents {
		info, _ := e.Info()
		files += info.Size()
	}
	if files > 16<<10 {
		t.Errorf("the audit files hold %d bytes after %d failed requests", files, flood)
	}

	as = newAuditServer(t, b, dir, secrets, toks) // a restart: the entries are read back
	defer as.close()
	check("after a restart")
}
