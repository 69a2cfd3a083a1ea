package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/apollo-11/apollo"
)

// A query value as long as the server's header limit lets through, that
// starts with a terminal's escape sequence, is refused naming its
// parameter and quoting only its start, escaped, for each of two
// tenants: before, apollo server answered GET
// /api/v1/metrics?window=<60 KiB> with the 60 KiB, escape sequence
// included, and so did step, since, until, status, a ping's timeout and
// action, and every "no such task" of an ID in the path.
func TestErrorsQuoteHostileQueriesBriefly(t *testing.T) {
	cfg := testConfig(t)
	secrets := figureTokens(t, &cfg, "acme admin acme", "globex admin globex")
	addr, _, _ := inProcess(t, cfg)
	value := "\x1b]0;owned\x07" + strings.Repeat("9", 60<<10)
	q, seg := url.QueryEscape(value), url.PathEscape(value)
	for _, tenant := range tenants {
		for _, tc := range []struct{ path, field string }{
			{"/api/v1/metrics?window=" + q, "window"},
			{"/api/v1/series?step=" + q, "step"},
			{"/api/v1/metrics/job?window=" + q, "window"},
			{"/api/v1/tasks?since=" + q, "since"},
			{"/api/v1/tasks?until=" + q, "until"},
			{"/api/v1/tasks?status=" + q, "status"},
			{"/api/v1/tasks?prefix=" + q, "prefix"},
			{"/api/v1/tasks/" + seg, "taskID"},
			{"/api/v1/jobs/health?limit=" + q, "limit"},
			{"/ping/job?timeout=" + q, "timeout"},
			{"/ping/job/" + seg, "action"},
		} {
			req, err := http.NewRequest("GET", "http://"+addr+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+secrets[tenant])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Error apollo.Error }
			_ = json.Unmarshal(body, &e)
			name := tenant + " " + tc.path[:strings.IndexAny(tc.path, "?%")]
			switch {
			case resp.StatusCode != 400 || e.Error.Field != tc.field:
				t.Errorf("%s: %d naming %q, want 400 naming %s: %.300s", name, resp.StatusCode, e.Error.Field, tc.field, body)
			case len(body) > 1<<10:
				t.Errorf("%s: an answer of %d bytes to a value of %d: %.300s…", name, len(body), len(value), body)
			case strings.ContainsFunc(e.Error.Message, unicode.IsControl) || !strings.Contains(e.Error.Message, `\x1b]0;owned\a`):
				t.Errorf("%s: the message does not quote the value's start escaped: %q", name, e.Error.Message)
			}
		}
	}
}
