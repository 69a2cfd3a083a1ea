package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A webhook that answers 429 with Retry-After is left alone that long:
// the retry comes no sooner (before, it came within the first backoff's
// second, to be refused again), and the delivery record says what the
// endpoint asked.
func TestWebhookRetryAfterIsHonoured(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	const asked = 3 * time.Second
	var calls atomic.Int64
	arrivals := make(chan time.Time, 10)
	h := &hook{srv: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrivals <- time.Now()
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}
	}))}
	t.Cleanup(h.srv.Close)
	d := newDeployment(t, false, h, deployOptions{})
	d.start()
	t.Cleanup(d.logOnFailure)
	d.do("acme", "PUT", "/api/v1/rules", "RULE acme_failed task_prefix: \"acme_\" ON: failed NOTIFY: hook\n", nil, 200)
	d.fail("acme", "acme_load")

	next := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-arrivals:
			return at
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("no %s within %v", what, testwait.Timeout(t))
			return time.Time{}
		}
	}
	first := next("first attempt")
	retry := next("retry")
	if gap := retry.Sub(first); gap < asked {
		t.Fatalf("the retry came %v after the 429, before the %v its Retry-After asked", gap, asked)
	}
	var l struct{ Attempts []apollo.Attempt }
	d.do("acme", "GET", "/api/v1/notifications", "", &l, 200)
	var retrying bool
	for _, a := range l.Attempts {
		retrying = retrying || a.Outcome == "retrying" && strings.Contains(a.Error, "429 Too Many Requests (Retry-After: 3s)")
	}
	if !retrying {
		t.Errorf("the delivery record does not show the Retry-After: %+v", l.Attempts)
	}
}
