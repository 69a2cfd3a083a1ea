package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// An expectations file of many broken entries, as large as a request
// may be (4 MiB), is answered with its problems at once. Before, each
// entry's check looked through every problem found so far: 140 000
// entries took one core about nine minutes, going on after the client
// had given up, so that a few such PUTs from one tenant's operator held
// every core of the server. Nothing of it is in force, for its tenant or
// the other, across kill -9.
func TestABigBrokenExpectationsFileIsAnsweredAtOnce(t *testing.T) {
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
	var b strings.Builder
	b.WriteString("expectations:\n")
	const n = 140_000
	for i := range n {
		fmt.Fprintf(&b, "  - {job: j%d, every: x}\n", i)
	}
	for _, c := range []*apiclient.Client{acme, def} {
		start := time.Now()
		_, err := c.PutExpectations(testCtx(t, time.Minute), []byte(b.String()))
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Fatalf("a file of %d broken entries (%d bytes): %v after %v, want 400 with its problems", n, b.Len(), err, time.Since(start).Round(time.Second))
		}
	}
	srv.kill()
	srv = x.start(t)
	def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	for c, want := range map[*apiclient.Client]int{def: 3, acme: 1} {
		if got, err := c.Expectations(ctx); err != nil || got.Count != want {
			t.Fatalf("after kill -9: %+v %v, want %d", got, err, want)
		}
	}
}

// The answer to a file with many problems lists the first 100, and says
// how many there are. Before, it listed every one: 4 MB of one entry
// repeated by a YAML alias (580 000 problems) was answered with 79 MB. A
// file with a few problems still gets every one. apollo expect apply
// says how many there are, not how many were listed.
func TestTheAnswerToABrokenExpectationsFileIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	const n = 580_000
	big := "expectations:\n  - &a {job: x, every: 5m}\n" + strings.Repeat("  - *a\n", n)
	for _, tc := range []struct {
		tenant, body string
		problems     int
		listed       int
	}{
		{"acme", big, n, 100},
		{"", "expectations:\n  - {job: a, every: x}\n  - {job: b, every: y}\n  - {job: c, every: z}\n", 3, 3},
	} {
		req, err := http.NewRequestWithContext(testCtx(t, time.Minute), "PUT", "http://"+srv.addr+"/api/v1/expectations", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+x.tokens[tc.tenant])
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var ans apiclient.ErrorBody
		if err := json.Unmarshal(body, &ans); err != nil || resp.StatusCode != http.StatusBadRequest || ans.Error == nil {
			t.Fatalf("tenant %q, %d problems: %d, %v, %.300s", tc.tenant, tc.problems, resp.StatusCode, err, body)
		}
		want := fmt.Sprintf("have %d problem(s)", tc.problems)
		if len(ans.Errors) != tc.listed || !strings.Contains(ans.Error.Message, want) || len(body) > 64<<10 {
			t.Errorf("tenant %q: %d bytes listing %d problems, %q; want %d listed and %q", tc.tenant, len(body), len(ans.Errors), ans.Error.Message, tc.listed, want)
		}
		file := filepath.Join(t.TempDir(), "expect.yaml")
		if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := cli(t, "http://"+srv.addr, "", "expect", "apply", file, "--token", x.tokens[tc.tenant])
		head, _, _ := strings.Cut(stderr, "\n")
		if code == 0 || !strings.Contains(head, fmt.Sprintf("%d errors", tc.problems)) || strings.Count(stderr, file+":") != tc.listed+1 {
			t.Errorf("tenant %q: apollo expect apply exited %d, said %q with %d places, want %d errors and %d places",
				tc.tenant, code, head, strings.Count(stderr, file+":")-1, tc.problems, tc.listed)
		}
	}
}
