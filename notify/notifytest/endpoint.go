package notifytest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
)

// Request is what a fake Endpoint received.
type Request struct {
	Header http.Header
	Query  url.Values
	Body   string
}

// Endpoint is a fake vendor endpoint for an HTTP channel's tests: a robot,
// a bot or a webhook.
type Endpoint struct {
	// Target is the path and query the channel must post to
	// ("/robot/send?access_token=tok3n"); a request elsewhere, or without
	// one of the query's parameters, fails the test.
	Target string
	// ContentType, when set, is how a request's Content-Type must start.
	ContentType string
	// Answer is the status and body for a request; nil answers 200 with
	// an empty body.
	Answer func(Request) (status int, body string)
}

// Reply is an Answer that is always status and body.
func Reply(status int, body string) func(Request) (int, string) {
	return func(Request) (int, string) { return status, body }
}

// Start serves e until the test ends. It returns the URL to post to and
// every request received, in order.
func (e Endpoint) Start(t testing.TB) (string, <-chan Request) {
	t.Helper()
	target, err := url.Parse(e.Target)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ok := r.Method == http.MethodPost && r.URL.Path == target.Path
		for k := range target.Query() {
			ok = ok && q.Get(k) == target.Query().Get(k)
		}
		if !ok {
			t.Errorf("request %s %s, want POST %s", r.Method, r.URL, e.Target)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, e.ContentType) {
			t.Errorf("content type %q, want %s", ct, e.ContentType)
		}
		b, _ := io.ReadAll(r.Body)
		req := Request{Header: r.Header, Query: q, Body: string(b)}
		got <- req
		status, body := http.StatusOK, ""
		if e.Answer != nil {
			status, body = e.Answer(req)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + e.Target, got
}

// Receive starts e, sends m through the notifier newNotifier makes for
// its URL, and returns what e received. It fails the test unless m is
// delivered at the first attempt.
func (e Endpoint) Receive(t testing.TB, newNotifier func(url string) (notify.Notifier, error), m *notify.Message) Request {
	t.Helper()
	u, got := e.Start(t)
	n, err := newNotifier(u)
	if err != nil {
		t.Fatal(err)
	}
	if retry, err := n.Notify(context.Background(), m); err != nil || retry {
		t.Fatalf("retryable %v, err %v", retry, err)
	}
	return <-got
}

// Failure is an answer that makes delivery fail, and what the notifier
// must make of it.
type Failure struct {
	Name      string
	Status    int    // the endpoint's status
	Answer    string // the endpoint's body
	Retryable bool   // what the notifier must say
	ErrPart   string // a part of the notifier's error
}

// CheckFailures sends m, once for each failure, through a notifier that
// newNotifier makes for an Endpoint at target answering that way. It fails
// the test unless every attempt fails as the failure says, and with no
// secret (a part of target that must stay hidden) in its error.
func CheckFailures(t *testing.T, target, secret string, newNotifier func(url string) (notify.Notifier, error), m *notify.Message, fs []Failure) {
	for _, f := range fs {
		t.Run(f.Name, func(t *testing.T) {
			u, _ := Endpoint{Target: target, Answer: Reply(f.Status, f.Answer)}.Start(t)
			n, err := newNotifier(u)
			if err != nil {
				t.Fatal(err)
			}
			retry, err := n.Notify(context.Background(), m)
			if err == nil || retry != f.Retryable || !strings.Contains(err.Error(), f.ErrPart) {
				t.Fatalf("retryable %v, err %v; want retryable %v, an error with %q", retry, err, f.Retryable, f.ErrPart)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("secret %q in error: %v", secret, err)
			}
		})
	}
}
