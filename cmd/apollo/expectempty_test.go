package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/rules"
)

// An expectations file that an editor has truncated, for the moment
// before it writes, has no expectations: a reload that would replace the
// running ones with none is refused, logged, and the old ones keep
// running, as with a rules file; a file that says it means it (the line
// "# apollo: empty") is taken. Before, the empty moment removed every
// expectation: the expected runs waiting for their grace were forgotten,
// and the jobs that were down no longer held their downstream alerts.
func TestAnEmptiedExpectationsFileIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the file's poll")
	}
	t.Parallel()
	cfg := testConfig(t)
	cfg.Expectations = filepath.Join(t.TempDir(), "expect.yaml")
	if err := os.WriteFile(cfg.Expectations, []byte(expectFile), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs, _ := inProcessWith(t, cfg, apollo.SystemClock)
	count := func() int {
		var got apiclient.Expectations
		apiGet(t, addr, "/api/v1/expectations", &got)
		return got.Count
	}
	if n := count(); n != 3 {
		t.Fatalf("%d expectations at start, want 3", n)
	}
	if err := os.WriteFile(cfg.Expectations, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the emptied file refused", func() bool {
		return strings.Contains(logs.String(), "expectations file refused; the old expectations keep running")
	})
	if l := logs.String(); !strings.Contains(l, rules.EmptyMarker) {
		t.Errorf("the log does not say how to empty the file on purpose: %s", l)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d expectations after the file was emptied, want the 3 that ran", n)
	}
	if err := os.WriteFile(cfg.Expectations, []byte(rules.EmptyMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a file emptied on purpose taken", func() bool { return count() == 0 })
}

// PUT /api/v1/expectations (apollo expect apply) with a body without
// expectations that would remove a tenant's running ones is refused,
// 400 invalid on the field expectations, and nothing changes, in the
// tenant's store or its file, across kill -9; the marker line removes
// them on purpose; other tenants are not touched. Before, an empty body
// (a client that sent nothing, `apollo expect apply` of an empty file)
// removed them all with a 200.
func TestAnEmptyExpectationsPutIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server twice")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := testCtx(t, time.Minute)
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	if _, err := acme.PutExpectations(ctx, []byte("expectations:\n  - job: acme_job\n    every: 1h\n")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*apiclient.Client{def, acme} {
		for _, body := range []string{"", "\n", "# nothing yet\n", "expectations:\n"} {
			_, err := c.PutExpectations(ctx, []byte(body))
			var ae *apiclient.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Err.Field != "expectations" ||
				!strings.Contains(ae.Err.Hint, rules.EmptyMarker) {
				t.Fatalf("PUT %q: %v, want 400 on expectations with the marker in the hint", body, err)
			}
		}
	}
	file, _ := os.ReadFile(filepath.Join(x.dir, "expect.yaml"))
	if string(file) != expectFile {
		t.Fatalf("the refused PUT wrote the file: %q", file)
	}
	srv.kill()
	srv = x.start(t)
	def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	for c, want := range map[*apiclient.Client]int{def: 3, acme: 1} {
		if got, err := c.Expectations(ctx); err != nil || got.Count != want {
			t.Fatalf("after kill -9: %+v %v, want %d", got, err, want)
		}
	}
	if got, err := acme.PutExpectations(ctx, []byte(rules.EmptyMarker+"\n")); err != nil || got.Count != 0 {
		t.Fatalf("emptied on purpose: %+v %v", got, err)
	}
	srv.kill()
	srv = x.start(t)
	def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	for c, want := range map[*apiclient.Client]int{def: 3, acme: 0} {
		if got, err := c.Expectations(ctx); err != nil || got.Count != want {
			t.Fatalf("after the second kill -9: %+v %v, want %d", got, err, want)
		}
	}
}
