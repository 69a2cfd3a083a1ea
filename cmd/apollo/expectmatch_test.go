package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An editor that read the expectations, then saved its whole file back
// after someone else saved theirs (another operator, or a proposal
// accepted on the dashboard meanwhile), erased what they saved without a
// word. A PUT with the version read (ETag) in If-Match is refused with
// 412 when the tenant's file changed since, and nothing changes, across
// kill -9; the other tenant's saves are not changes of this one's.
func TestExpectationsIfMatch(t *testing.T) {
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	do := func(method, tenant, body, ifMatch string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testCtx(t, time.Minute), method, "http://"+srv.addr+"/api/v1/expectations", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+x.tokens[tenant])
		if method == "PUT" {
			req.Header.Set("Content-Type", "application/yaml")
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
	file := func(jobs ...string) string {
		var b strings.Builder
		b.WriteString("expectations:\n")
		for _, j := range jobs {
			b.WriteString("  - job: " + j + "\n    every: 1h\n")
		}
		return b.String()
	}

	_, read, _ := do("GET", "acme", "", "")
	if read == "" {
		t.Fatal("GET /api/v1/expectations: no ETag")
	}
	if st, _, body := do("PUT", "", file("default_job"), ""); st != 200 {
		t.Fatalf("the default tenant's PUT: %d %s", st, body)
	}
	st, saved, body := do("PUT", "acme", file("mine"), read)
	if st != 200 || saved == "" || saved == read {
		t.Fatalf("PUT over the version read, after the other tenant's save: %d ETag %q %s", st, saved, body)
	}
	if st, _, body := do("PUT", "acme", file("mine", "theirs"), ""); st != 200 {
		t.Fatalf("another operator's PUT: %d %s", st, body)
	}
	st, _, body = do("PUT", "acme", file("mine", "mine_too"), saved)
	if st != http.StatusPreconditionFailed || !strings.Contains(body, "changed since you read them") {
		t.Fatalf("PUT over a version saved over since: %d %s, want 412 saying the file changed", st, body)
	}

	srv.kill()
	srv = x.start(t)
	if _, _, body := do("GET", "acme", "", ""); !strings.Contains(body, "theirs") || strings.Contains(body, "mine_too") {
		t.Errorf("acme's expectations after the refused PUT and kill -9: %s, want theirs kept", body)
	}
}
