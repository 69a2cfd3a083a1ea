package httpapi

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// queryParams are every query parameter a route reads.
var queryParams = []string{"window", "step", "prefix", "after", "cursor", "status", "since", "until", "limit", "runs", "job", "state",
	"channel", "alert", "timeout"}

// hostileValues are what an attacker puts in a name, an ID or a query
// value: 200 KiB, and a short one of control characters, a bidi
// override and invalid UTF-8. Each holds runs of "x" longer than
// maxExcerpt only in the long one.
var hostileValues = map[string]string{
	"200 KiB":            "\x1b[31m" + strings.Repeat("x", 200<<10) + "\xff",
	"control characters": "a\x01\x1b[2J\u202e\xfe\x7fb",
}

// routeBodies let a route reach the lookup of its path value.
var routeBodies = map[string]string{
	"/api/v1/tasks/{id}/status": `{"status":"success","reason":"checked"}`,
}

// checkHostileAnswer fails when an answer carries back more than an
// excerpt of what was sent, is a server error, or holds an error that
// does not escape what it quotes or does not name the parameter.
func checkHostileAnswer(t *testing.T, name, field string, status int, body string) {
	t.Helper()
	if status >= 500 {
		t.Errorf("%s: %d %.300s", name, status, body)
	}
	if strings.Contains(body, strings.Repeat("x", maxExcerpt+1)) {
		t.Errorf("%s: %d, the answer (%d bytes) carries back more than %d bytes of the value: %.200s…", name, status, len(body), maxExcerpt, body)
	}
	if status < 400 || !strings.HasPrefix(body, "{") {
		return
	}
	var e struct{ Error *apollo.Error }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil {
		t.Errorf("%s: %d, not an error body: %.300s", name, status, body)
		return
	}
	for _, s := range []string{e.Error.Message, e.Error.Hint, e.Error.Field} {
		if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }) {
			t.Errorf("%s: %d, the error quotes the value unescaped: %+q", name, status, s)
		}
	}
	if status == 400 && field != "" && e.Error.Field != field {
		t.Errorf("%s: 400 naming field %q, want %q: %s", name, e.Error.Field, field, e.Error.Message)
	}
}

// Every route of the table, as an admin of each of two tenants, with a
// hostile value in each of its path values and, for the reads and the
// pings, in each query parameter: no answer carries back more than an
// excerpt of it, control characters come back escaped, and a refusal
// names the parameter. Before, GET /api/v1/metrics?window=<200 KiB>
// answered the 200 KiB back (so did since, until, status, a ping's
// action and timeout, and every "no such task, alert, silence, channel"
// of an ID in the path).
func TestEveryRouteQuotesHostileInputBriefly(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 0)
	for _, rt := range sec.api.routes() {
		for _, tenant := range []string{"a", "b"} {
			token := sec.tokens["admin/"+tenant]
			fill := strings.NewReplacer("{id}", "t-a", "{name}", "job", "{action}", "start")
			for what, v := range hostileValues {
				for _, key := range []string{"id", "name", "action"} {
					if !strings.Contains(rt.path, "{"+key+"}") {
						continue
					}
					path := strings.Replace(rt.path, "{"+key+"}", url.PathEscape(v), 1)
					path = fill.Replace(path)
					status, body := sec.do(t, rt.method, path, token, routeBodies[rt.path])
					checkHostileAnswer(t, rt.method+" "+rt.path+" {"+key+"} "+what+" as "+tenant, "", status, body)
				}
				if rt.path == "/" { // every path no other route claims
					status, body := sec.do(t, "GET", "/"+url.PathEscape(v), token, "")
					checkHostileAnswer(t, "GET / "+what+" as "+tenant, "", status, body)
				}
				if rt.method != "GET" || rt.path == "/api/v1/stream" {
					continue
				}
				for _, q := range queryParams {
					path := fill.Replace(rt.path) + "?" + q + "=" + url.QueryEscape(v)
					status, body := sec.do(t, rt.method, path, token, "")
					checkHostileAnswer(t, rt.method+" "+rt.path+"?"+q+" "+what+" as "+tenant, q, status, body)
				}
			}
		}
	}
}

// Every numeric query parameter of every read, at the int64 extremes,
// past them, negative and zero: a refusal that names it, never a server
// error.
func TestEveryRouteRefusesOutOfRangeNumbers(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 0)
	numbers := []string{"9223372036854775807", "-9223372036854775808", "99999999999999999999", "-1", "0", "1e3", "0x10",
		"9223372036854775807ns", "-9223372036854775808ns", "2562048h", "-1s", "0s"}
	for _, rt := range sec.api.routes() {
		if rt.method != "GET" || rt.path == "/api/v1/stream" {
			continue
		}
		path := strings.NewReplacer("{id}", "t-a", "{name}", "job", "{action}", "start").Replace(rt.path)
		for _, tenant := range []string{"a", "b"} {
			for _, q := range []string{"window", "step", "since", "until", "limit", "runs", "timeout"} {
				for _, n := range numbers {
					status, body := sec.do(t, "GET", path+"?"+q+"="+url.QueryEscape(n), sec.tokens["admin/"+tenant], "")
					checkHostileAnswer(t, "GET "+path+"?"+q+"="+n+" as "+tenant, q, status, body)
				}
			}
		}
	}
}
