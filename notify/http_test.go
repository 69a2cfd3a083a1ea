package notify

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A Retry-After header is read in both its forms, the date one counted
// from the answer's own Date; what cannot be read, or asks for no wait,
// is no wait, and a wait past a week is a week.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	const date = "Wed, 21 Oct 2026 07:28:00 GMT"
	for _, c := range []struct {
		name, value, date string
		want              time.Duration
	}{
		{"none", "", date, 0},
		{"seconds", "120", "", 2 * time.Minute},
		{"spaces", " 7 ", "", 7 * time.Second},
		{"zero", "0", "", 0},
		{"negative", "-5", "", 0},
		{"int64 max", "9223372036854775807", "", maxRetryAfter},
		{"past int64", "9223372036854775808", "", 0},
		{"date", "Wed, 21 Oct 2026 07:30:30 GMT", date, 150 * time.Second},
		{"date in the past", "Wed, 21 Oct 2026 07:00:00 GMT", date, 0},
		{"date, no Date header", "Wed, 21 Oct 2026 07:30:30 GMT", "", 0},
		{"date years ahead", "Wed, 21 Oct 2099 07:30:30 GMT", date, maxRetryAfter},
		{"garbage", "soon\r\nX: y", date, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.value != "" {
				h.Set("Retry-After", c.value)
			}
			if c.date != "" {
				h.Set("Date", c.date)
			}
			if got := retryAfter(h); got != c.want {
				t.Errorf("Retry-After %q, Date %q: %v, want %v", c.value, c.date, got, c.want)
			}
		})
	}
}

// Which answers a post retries: the server asking again (408, 429, 5xx)
// is retried, every other failure would fail the same way next time.
func TestPostRetries(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{400: false, 401: false, 404: false, 408: true, 413: false, 429: true, 500: true, 502: true, 503: true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
		retry, err := Endpoint{Channel: "webhook"}.Post(t.Context(), srv.URL, []byte(`{}`))
		srv.Close()
		if err == nil || retry != want {
			t.Errorf("HTTP %d: retry %v (%v), want %v", code, retry, err, want)
		}
	}
}
