package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
)

// Callers without a token cannot push the tenants' entries out of the
// audit files either. Their failures were written to the same file as the
// tenants' actions, and rotated it: a caller sending one request a minute
// with a long path turned the files over in a few days (in 90 minutes from
// a hundred addresses), the tenants' corrections were gone from the disk,
// and after a restart (here: a kill -9, the files as they were) their
// admins listed nothing. The server's own entries now go to a file of
// their own.
func TestAuditFailuresDoNotRotateTenantsOut(t *testing.T) {
	t.Parallel()
	b, err := bus.New(bus.Options{Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	secrets, toks := adminTokens(t)
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC))
	serve := func(dir string) (*httptest.Server, *audit.Log) {
		l, err := audit.Open(audit.Options{Dir: dir, Entries: 100, FileBytes: 4 << 10, Files: 1, Logger: discardLogger, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(New(Options{Bus: b, Auth: NewTokenAuth(toks), Audit: l, Logger: discardLogger, Clock: clock}))
		t.Cleanup(func() { srv.Close(); l.Close() })
		return srv, l
	}
	dir := filepath.Join(t.TempDir(), "audit")
	srv, _ := serve(dir)
	for _, tenant := range []string{"a", "b"} {
		tok := secrets[tenant]
		if st, body := callAs(t, "POST", srv.URL+"/api/v1/events", tok, `{"taskID":"run-`+tenant+`","sequence":1,"status":"running","ts":1764400000000}`); st != 200 {
			t.Fatalf("seeding tenant %s: %d %s", tenant, st, body)
		}
		if st, body := callAs(t, "POST", srv.URL+"/api/v1/tasks/run-"+tenant+"/status", tok, `{"status":"success","reason":"checked `+tenant+`"}`); st != 200 {
			t.Fatalf("correcting in tenant %s: %d %s", tenant, st, body)
		}
	}

	// One failed request a minute for 40 minutes: 40 entries of about
	// 700 bytes, five times what the files may hold.
	path := "/api/v1/tasks/" + strings.Repeat("x", 600)
	for range 40 {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer apl_wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("a wrong token: %d", resp.StatusCode)
		}
		clock.Advance(time.Minute)
		callAs(t, "GET", srv.URL+"/api/v1/audit?limit=1", secrets[""], "") // ends the interval: its entry is written
	}

	// A kill -9 leaves the files as they are: copy them while the log is
	// open, and start again from the copy.
	crashed := copyAsKilled(t, dir)
	srv, _ = serve(crashed)
	for _, tenant := range []string{"a", "b"} {
		st, body := callAs(t, "GET", srv.URL+"/api/v1/audit?limit=100", secrets[tenant], "")
		if st != 200 || !strings.Contains(body, `"action":"task.correct"`) || !strings.Contains(body, `"target":"run-`+tenant+`"`) {
			t.Errorf("after the restart, tenant %s's admin lists %d %s; want its correction", tenant, st, body)
		}
	}
	if st, body := callAs(t, "GET", srv.URL+"/api/v1/audit?limit=100", secrets[""], ""); st != 200 || !strings.Contains(body, `"action":"auth.fail"`) {
		t.Errorf("after the restart, the default tenant's admin lists %d %s; want the failures", st, body)
	}
	if size := dirSize(crashed); size > 2*2*(4<<10) {
		t.Errorf("the audit files hold %d bytes, over two sets of two 4 KiB files", size)
	}
}

// One tenant's actions cannot push another tenant's out of the audit
// files either. Every tenant's entries went to one set of files: a
// tenant's admin correcting runs with long reasons rotated the files over,
// the other tenant's correction was gone from the disk, and after a
// restart (here: a kill -9, the files as they were; or a restore from a
// backup of them) that tenant's admin listed nothing, while its entries in
// memory had been kept apart all along. Each tenant now has files of its
// own.
func TestAuditOfOneTenantDoesNotRotateAnothersOut(t *testing.T) {
	t.Parallel()
	b, err := bus.New(bus.Options{Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	secrets, toks := adminTokens(t)
	serve := func(dir string) *httptest.Server {
		l, err := audit.Open(audit.Options{Dir: dir, Entries: 100, FileBytes: 4 << 10, Files: 1, Logger: discardLogger})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(New(Options{Bus: b, Auth: NewTokenAuth(toks), Audit: l, Logger: discardLogger}))
		t.Cleanup(func() { srv.Close(); l.Close() })
		return srv
	}
	dir := filepath.Join(t.TempDir(), "audit")
	srv := serve(dir)
	correct := func(tenant, id, reason string) {
		t.Helper()
		tok := secrets[tenant]
		if st, body := callAs(t, "POST", srv.URL+"/api/v1/events", tok, `{"taskID":"`+id+`","sequence":1,"status":"running","ts":1764400000000}`); st != 200 {
			t.Fatalf("seeding tenant %s: %d %s", tenant, st, body)
		}
		if st, body := callAs(t, "POST", srv.URL+"/api/v1/tasks/"+id+"/status", tok, `{"status":"success","reason":"`+reason+`"}`); st != 200 {
			t.Fatalf("correcting in tenant %s: %d %s", tenant, st, body)
		}
	}
	correct("a", "run-a", "checked a")
	// Tenant b: 40 corrections of about 750 bytes, five times what its
	// files may hold.
	for i := range 40 {
		correct("b", "run-b-"+strconv.Itoa(i), strings.Repeat("b", 600))
	}

	crashed := copyAsKilled(t, dir)
	srv = serve(crashed)
	if st, body := callAs(t, "GET", srv.URL+"/api/v1/audit?limit=100", secrets["a"], ""); st != 200 || !strings.Contains(body, `"target":"run-a"`) {
		t.Errorf("after the restart, tenant a's admin lists %d %s; want its correction", st, body)
	}
	if st, body := callAs(t, "GET", srv.URL+"/api/v1/audit?limit=100", secrets["b"], ""); st != 200 || !strings.Contains(body, `"target":"run-b-39"`) || strings.Contains(body, "run-a") {
		t.Errorf("after the restart, tenant b's admin lists %d %s; want its last correction and none of a's", st, body)
	}
	if size := dirSize(crashed); size > 2*2*(4<<10) {
		t.Errorf("the audit files hold %d bytes, over two tenants' sets of two 4 KiB files", size)
	}
}

// copyAsKilled copies the audit directory dir as a kill -9 leaves it (the
// files as they are) and returns the copy.
func copyAsKilled(t *testing.T, dir string) string {
	t.Helper()
	crashed := filepath.Join(t.TempDir(), "audit")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return crashed
}

// dirSize is the bytes of the files in dir.
func dirSize(dir string) int64 {
	var size int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			size += info.Size()
		}
	}
	return size
}
