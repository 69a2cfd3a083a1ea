package main

import (
	"errors"
	"fmt"
	"net/http"
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
