package apiclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

// codes are every error code of the domain.
var codes = []string{apollo.EINVALID, apollo.ENOTFOUND, apollo.ECONFLICT, apollo.EPRECONDITION, apollo.EUNAUTHORIZED, apollo.EFORBIDDEN,
	apollo.ETOOMANY, apollo.ETOOLARGE, apollo.EUNSUPPORTED, apollo.EUNAVAILABLE, apollo.EINTERNAL}

func TestCodeStatusTable(t *testing.T) {
	t.Parallel()
	seen := map[int]string{}
	for _, code := range codes {
		st := StatusOf(code)
		if other, ok := seen[st]; ok {
			t.Errorf("%s and %s both answer %d: a client could not tell them apart", code, other, st)
		}
		seen[st] = code
		if got := CodeOf(st); got != code {
			t.Errorf("CodeOf(StatusOf(%s)) = %s", code, got)
		}
	}
	if len(codeStatus) != len(codes) {
		t.Errorf("the table has %d codes, the domain %d", len(codeStatus), len(codes))
	}
	if StatusOf("no_such_code") != http.StatusInternalServerError || CodeOf(http.StatusTeapot) != apollo.EINTERNAL {
		t.Error("an unknown code or status is not internal")
	}
}

// TestErrorAnswers: whatever a server, or a proxy in front of it, answers
// with, the client returns an *Error with a code of the table, a message
// that says what happened, and the problems of a rules file when there
// are some.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	tests := []struct {
		name, ctype, body string
		status            int
		code, msg         string
		noRoute           bool
		problems          int
	}{
		{"the API's error", "application/json", `{"error":{"code":"not_found","field":"taskID","message":"no task \"x\""}}`, 404,
			apollo.ENOTFOUND, `taskID: no task "x"`, false, 0},
		{"no code: the status's", "application/json", `{"error":{"message":"m"}}`, 409, apollo.ECONFLICT, "m", false, 0},
		{"no message: the status", "application/json", `{"error":{"code":"forbidden"}}`, 403, apollo.EFORBIDDEN,
			"GET /api/v1/tasks/x: the server answered 403 Forbidden", false, 0},
		{"plain 404: no such route", "text/plain", "404 page not found\n", 404, apollo.ENOTFOUND,
			"GET /api/v1/tasks/x: the server answered 404 Not Found: the server at SERVER does not serve GET /api/v1/tasks/x", true, 0},
		{"plain 405: no such route", "text/plain", "Method Not Allowed\n", 405, apollo.ENOTFOUND, "does not serve GET", true, 0},
		{"a proxy's page", "text/html", "<html>Bad Gateway</html>", 502, apollo.EINTERNAL,
			"GET /api/v1/tasks/x: the server answered 502 Bad Gateway: <html>Bad Gateway</html>", false, 0},
		{"a long page is cut", "text/plain", long, 503, apollo.EUNAVAILABLE, strings.Repeat("é", 100) + "…", false, 0},
		{"a rules file's problems", "application/json",
			`{"error":{"code":"invalid","message":"2 problems"},"errors":[{"pos":"1:49","line":1,"col":49,"message":"m","hint":"h"},{"pos":"2:3","line":2,"col":3,"message":"n"}]}`,
			400, apollo.EINVALID, "2 problems", false, 2},
		{"problems in a form this client does not read", "application/json",
			`{"error":{"code":"invalid","message":"1 problem"},"errors":[{"pos":{"line":2,"column":3},"message":"n"}]}`,
			400, apollo.EINVALID, "1 problem", false, 0},
		{"a null error", "application/json", `{"error":null}`, 401, apollo.EUNAUTHORIZED,
			`the server answered 401 Unauthorized: {"error":null}`, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c, _ := New(srv.URL)
			_, err := c.Task(context.Background(), "x")
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("%T %v is not an *Error", err, err)
			}
			if apollo.ErrorCode(err) != tt.code || ae.Status != tt.status {
				t.Errorf("code %s status %d, want %s %d", apollo.ErrorCode(err), ae.Status, tt.code, tt.status)
			}
			if want := strings.ReplaceAll(tt.msg, "SERVER", srv.URL); !strings.Contains(err.Error(), want) {
				t.Errorf("message %q, want it to hold %q", err.Error(), want)
			}
			if errors.Is(err, ErrNoRoute) != tt.noRoute {
				t.Errorf("errors.Is(err, ErrNoRoute) = %t", !tt.noRoute)
			}
			if len(ae.Problems) != tt.problems {
				t.Errorf("%d problems, want %d", len(ae.Problems), tt.problems)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there now
	c, _ := New(srv.URL)
	_, err := c.Tasks(context.Background(), TaskQuery{})
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "cannot reach "+srv.URL+": ") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("%T %v", err, err)
	}
}

func TestReadyWhileRecovering(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"recovering"}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL)
	h, err := c.Ready(context.Background())
	if h.Status != "recovering" || apollo.ErrorCode(err) != apollo.EUNAVAILABLE || !strings.Contains(err.Error(), "is not ready: recovering") {
		t.Errorf("%+v %v", h, err)
	}
}

func TestNewRefusesWhatIsNotAServer(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:1969", "ftp://example.com", "http://", "http://%zz"} {
		if _, err := New(u); apollo.ErrorCode(err) != apollo.EINVALID {
			t.Errorf("New(%q): %v", u, err)
		}
	}
	c, err := New("https://apollo.example.com/prefix/")
	if err != nil || c.Server() != "https://apollo.example.com/prefix" {
		t.Errorf("%v %v", c, err)
	}
}

// FuzzErrorAnswer feeds arbitrary error answers to the one place that
// reads them: whatever a server or a proxy sends, the error has a code of
// the table and a message, and never panics.
func FuzzErrorAnswer(f *testing.F) {
	f.Add(404, true, []byte(`{"error":{"code":"not_found","field":"taskID","message":"no task \"x\""}}`))
	f.Add(400, true, []byte(`{"error":{"code":"invalid","message":"2 problems"},"errors":[{"pos":"1:49","line":1,"col":49,"message":"m","hint":"h"},{"pos":{"line":2,"column":3},"message":"n"}]}`))
	f.Add(400, true, []byte(`{"error":{"code":"invalid","message":"x"},"errors":[{"pos":7}]}`))
	f.Add(404, false, []byte("404 page not found\n"))
	f.Add(502, false, []byte("<html>Bad Gateway</html>"))
	f.Add(401, true, []byte(`{"error":null}`))
	f.Add(500, true, []byte(`{"error":{"code":"internal","message":"`))
	f.Fuzz(func(t *testing.T, status int, isJSON bool, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		resp := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{}}
		if isJSON {
			resp.Header.Set("Content-Type", "application/json")
		}
		e := answerError("http://127.0.0.1:1969", "PUT", "/api/v1/rules", resp, body)
		if e.Err == nil || e.Error() == "" || e.Err.Message == "" {
			t.Fatalf("no message for status %d body %q", status, body)
		}
		if e.Err.Code == "" {
			t.Fatalf("no code for status %d body %q", status, body)
		}
		if !isJSON && !e.noRoute && !slices.Contains(codes, e.Err.Code) {
			t.Fatalf("code %q for a plain answer of status %d", e.Err.Code, status)
		}
	})
}
