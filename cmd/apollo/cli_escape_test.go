package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apollo-11/apollo/tui/components"
)

// evil is what a reporter (or a hostile server, or a proxy in between)
// can put in any text the CLI prints: a window title, a bell, a screen
// clear, a colour, a C1 CSI, a bidi override, DEL.
const evil = "\x1b]0;pwned\a\x1b[2J\x1b[31m\u009b\u202e\x7f"

// rawControl matches a character components.Escape escapes, newline aside.
var rawControl = regexp.MustCompile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")

// evilAPI answers every route the CLI reads with evil in every string.
func evilAPI(t *testing.T) *httptest.Server {
	answer := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v) // C0 as \u001b; DEL, C1 and bidi raw
	}
	task := map[string]any{"taskID": evil, "name": evil, "tenant": evil, "status": "failed", "sequence": 3,
		"updatedAt": 1764410400000, "history": []map[string]any{
			{"taskID": evil, "sequence": 1, "status": "running", "ts": 1764410400000, "kind": "report", "extra": map[string]any{evil: evil}},
			{"taskID": evil, "sequence": 1, "status": "failed", "ts": 1764410400000, "kind": "correction", "actor": evil, "reason": evil},
		}}
	row := map[string]any{"name": evil, "count": 3, "failed": 1, "failedRate": 0.33}
	silence := map[string]any{"id": evil, "rule": evil, "prefix": evil, "labels": map[string]any{evil: evil},
		"startsAt": "2026-11-29T10:00:00Z", "endsAt": "2026-11-29T12:00:00Z", "createdBy": evil, "comment": evil}
	routes := map[string]func(w http.ResponseWriter){
		"GET /api/v1/tasks": func(w http.ResponseWriter) {
			answer(w, 200, map[string]any{"tasks": []any{task, map[string]any{"taskID": "ok-1", "name": evil, "status": "running"}}})
		},
		"GET /api/v1/tasks/x":         func(w http.ResponseWriter) { answer(w, 200, task) },
		"POST /api/v1/tasks/x/status": func(w http.ResponseWriter) { answer(w, 200, task) },
		"GET /api/v1/tasks/gone": func(w http.ResponseWriter) {
			answer(w, 404, map[string]any{"error": map[string]any{"code": "not_found", "message": evil, "hint": evil}})
		},
		"GET /api/v1/tasks/proxy": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(502)
			w.Write([]byte("bad gateway " + evil))
		},
		"GET /api/v1/metrics": func(w http.ResponseWriter) {
			answer(w, 200, map[string]any{"window": evil, "total": row, "jobs": []any{row}})
		},
		"GET /api/v1/metrics/x": func(w http.ResponseWriter) {
			answer(w, 200, map[string]any{"name": evil, "window": evil, "step": evil, "points": []any{row}})
		},
		"GET /api/v1/jobs": func(w http.ResponseWriter) {
			answer(w, 200, map[string]any{"jobs": []any{map[string]any{"name": evil, "schedule": evil, "after": []string{evil}, "lastTaskID": evil}}})
		},
		"POST /api/v1/jobs/x/run": func(w http.ResponseWriter) { answer(w, 200, map[string]any{"taskID": evil}) },
		"GET /api/v1/alerts": func(w http.ResponseWriter) {
			answer(w, 200, map[string]any{"alerts": []any{map[string]any{"id": evil, "rule": evil, "group": evil, "state": "firing",
				"severity": "critical", "summary": evil, "ackedBy": evil, "startedAt": "2026-11-29T10:00:00Z"}}})
		},
		"POST /api/v1/alerts/" + evil + "/ack": func(w http.ResponseWriter) { answer(w, 200, map[string]any{"alert": map[string]any{"id": evil}}) },
		"GET /api/v1/silences":                 func(w http.ResponseWriter) { answer(w, 200, map[string]any{"silences": []any{silence}}) },
		"POST /api/v1/silences":                func(w http.ResponseWriter) { answer(w, 201, map[string]any{"silence": silence}) },
		"GET /api/v1/rules": func(w http.ResponseWriter) {
			answer(w, 200, map[string]any{"rules": []any{map[string]any{"name": evil, "kind": evil, "text": evil}}, "source": evil})
		},
		"GET /healthz":       func(w http.ResponseWriter) { answer(w, 200, map[string]any{"status": evil}) },
		"GET /readyz":        func(w http.ResponseWriter) { answer(w, 200, map[string]any{"status": "ready"}) },
		"GET /api/v1/system": func(w http.ResponseWriter) { answer(w, 200, map[string]any{"bus": map[string]any{evil: evil}}) },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		f(w)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Whatever a server says, every command prints it escaped: tables, the
// task's fields and timeline, JSON, one-line answers, and the server's
// error messages, even a proxy's that is not JSON (issue 16.9).
func TestCLIEscapesWhatServersSay(t *testing.T) {
	t.Parallel()
	srv := evilAPI(t)
	for _, args := range [][]string{
		{"tasks"}, {"tasks", "-o", "json"}, {"task", "x"}, {"task", "x", "-o", "json"},
		{"task", "fix", "x", "--status", "success", "--reason", "checked"},
		{"task", "gone"}, {"task", "proxy"},
		{"jobs"}, {"job", "x"}, {"job", "list"}, {"job", "run", "x"},
		{"alerts"}, {"ack", evil}, {"silence", "list"}, {"silence", "add", "--rule", "r", "--for", "1h", "--comment", "c"},
		{"rules", "list"}, {"status"}, {"status", "-o", "json"},
		{"__complete", "task", ""}, // shell completion offers ok-1 only
	} {
		t.Run(components.Escape(strings.Join(args[:min(len(args), 3)], " ")), func(t *testing.T) {
			t.Parallel()
			var out, errOut syncBuffer
			args = append(args[:len(args):len(args)], "--server", srv.URL)
			if args[0] == "__complete" { // it completes its last argument
				args = []string{"__complete", "task", "--server", srv.URL, ""}
			}
			run(t.Context(), args, strings.NewReader(""), &out, &errOut)
			all := out.String() + errOut.String()
			if args[0] == "__complete" { // a tab separates a candidate from its description
				all = strings.Replace(all, "ok-1\t", "ok-1 ", 1)
			}
			if !utf8.ValidString(all) {
				t.Errorf("output is not UTF-8:\n%q", all)
			}
			if loc := rawControl.FindStringIndex(all); loc != nil {
				t.Errorf("raw %q in the output:\n%q", all[loc[0]:loc[1]], all)
			}
			if !strings.Contains(all, `\u001b]0;pwned\u0007\u001b[2J\u001b[31m\u009b\u202e\u007f`) {
				t.Errorf("the server's text is not in the output, escaped:\n%q", all)
			}
		})
	}
}
