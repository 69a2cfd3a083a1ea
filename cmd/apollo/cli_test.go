package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// fakeAPI stands in for a server's alert, silence, rules, expectations
// and health routes, answering in the shapes of httpapi/alerts.go, so that the
// commands' tables and errors are tested before a server with those
// routes runs in the testscript tests.
type fakeAPI struct {
	mu       sync.Mutex
	requests []string       // "METHOD /path?query"
	bodies   map[string]any // the last JSON body per "METHOD /path"
	ready    bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.requests = append(f.requests, key+"?"+r.URL.RawQuery)
	if r.Header.Get("Content-Type") == "application/json" {
		var v any
		json.Unmarshal(body, &v)
		f.bodies[key] = v
	}
	ready := f.ready
	f.mu.Unlock()
	answer := func(status int, v string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, v)
	}
	notFound := `{"error":{"code":"not_found","message":"no such thing"}}`
	switch key {
	case "GET /healthz":
		answer(200, `{"status":"ok"}`)
	case "GET /readyz":
		if ready {
			answer(200, `{"status":"ready"}`)
		} else {
			answer(503, `{"status":"recovering"}`)
		}
	case "GET /api/v1/system":
		answer(200, `{"wal":{"segments":2,"fsync":"batch"},"bus":{"tasks":1000000,"queued":[]},"stream":{"clients":null}}`)
	case "GET /api/v1/alerts":
		answer(200, `{"alerts":[
			{"id":"a1","rule":"batch_failures","group":"batch_","state":"firing","severity":"critical","summary":"failed_rate 0.12 > 0.05 for batch_ over 5m","value":0.12,"startedAt":"2026-11-29T10:00:00Z","firedAt":"2026-11-29T10:02:00Z","ackedBy":"ops"},
			{"id":"a2","rule":"etl_failed","group":"etl_","state":"pending","severity":"warning","summary":"etl_load failed","value":1,"startedAt":"2026-11-29T10:05:00Z","silencedBy":["s1"]}]}`)
	case "POST /api/v1/alerts/a1/ack":
		answer(200, `{"alert":{"id":"a1","state":"firing","ackedBy":"local"}}`)
	case "POST /api/v1/alerts/zz/ack":
		answer(404, notFound)
	case "POST /api/v1/alerts/a2/ack":
		answer(409, `{"error":{"code":"conflict","message":"alert a2 is resolved","hint":"nothing to acknowledge"}}`)
	case "GET /api/v1/silences":
		answer(200, `{"silences":[{"id":"s1","prefix":"etl_","labels":{"team":"data","env":"prod"},"startsAt":"2026-11-29T10:00:00Z","endsAt":"2026-11-29T12:00:00Z","createdBy":"ops","comment":"vendor outage"}]}`)
	case "POST /api/v1/silences":
		answer(201, `{"silence":{"id":"s2","rule":"batch_failures","startsAt":"2026-11-29T10:00:00Z","endsAt":"2026-11-29T12:00:00Z","createdBy":"local","comment":"c"}}`)
	case "DELETE /api/v1/silences/s1":
		answer(200, `{"removed":"s1"}`)
	case "DELETE /api/v1/silences/zz":
		answer(404, notFound)
	case "GET /api/v1/rules":
		answer(200, `{"rules":[{"name":"batch_failures","kind":"rate","text":"RULE batch_failures task_prefix: \"batch_\" WINDOW: 5m","json":{}}],"source":"# ours\nRULE batch_failures task_prefix: \"batch_\" WINDOW: 5m\n"}`)
	case "PUT /api/v1/rules":
		if bytes.Contains(body, []byte("bad")) {
			answer(400, `{"error":{"code":"invalid","message":"the rules have 2 problem(s); nothing was changed"},
				"errors":[{"pos":"1:49","line":1,"col":49,"message":"unknown metric \"failed_rat\"","hint":"did you mean failed_rate?"},{"pos":"2:3","line":2,"col":3,"message":"unknown key"}]}`)
			return
		}
		answer(200, `{"rules":[{"name":"a"},{"name":"b"}]}`)
	case "GET /api/v1/expectations":
		answer(200, `{"source":"# our expectations\njobs: {}\n","count":1}`)
	case "PUT /api/v1/expectations":
		if bytes.Contains(body, []byte("bad")) {
			answer(400, `{"error":{"code":"invalid","message":"the file has 1 problem(s); nothing was changed"},
				"errors":[{"pos":"3:5","line":3,"col":5,"message":"job \"x\": grace: not a duration"}]}`)
			return
		}
		answer(200, `{"source":"","count":2}`)
	case "GET /api/v1/expectations/suggestions":
		if r.URL.Query().Get("job") == "nope" {
			answer(200, `{"suggestions":[]}`)
			return
		}
		answer(200, `{"suggestions":[{"job":"nightly","describe":"daily at 02:00","confidence":0.93,"runs":21,"durations":21,"grace":"10m","maxRuntime":"1h"}]}`)
	case "POST /api/v1/expectations/suggestions/nightly/accept":
		answer(200, `{"source":"","count":3}`)
	default:
		http.NotFound(w, r) // as net/http's mux: plain text
	}
}

// cli runs the binary in-process against srv with a clean environment.
func cli(t *testing.T, srv string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--server", srv)
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func cleanEnv(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("APOLLO_TOKEN", "")
	t.Setenv("APOLLO_SERVER", "")
	t.Setenv("TZ", "UTC")
}

func TestAlertCommandsAgainstFakeAPI(t *testing.T) {
	cleanEnv(t)
	api := &fakeAPI{bodies: map[string]any{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	rulesFile := filepath.Join(t.TempDir(), "rules.txt")
	os.WriteFile(rulesFile, []byte("RULE bad\n"), 0o600)
	goodFile := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(goodFile, []byte(`{"rules":[]}`), 0o600)
	expectFile := filepath.Join(t.TempDir(), "expectations.yaml")
	os.WriteFile(expectFile, []byte("jobs: {}\n"), 0o600)

	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout []string // regexps, each must match a line
		stderr []string
	}{
		{"alerts table", []string{"alerts"}, "", 0, []string{
			`^ID +STATE +SEVERITY +RULE +GROUP +SINCE +NOTE +SUMMARY$`,
			`^a1 +firing +critical +batch_failures +batch_ +2026-11-29 10:02:00 +acked by ops +failed_rate 0\.12 > 0\.05 for batch_ over 5m$`,
			`^a2 +pending +warning +etl_failed +etl_ +2026-11-29 10:05:00 +silenced +etl_load failed$`}, nil},
		{"alerts json", []string{"alerts", "--state", "firing", "-o", "json"}, "", 0, []string{`^  "alerts": \[$`}, nil},
		{"alerts bad state", []string{"alerts", "--state", "burning"}, "", 2, nil, []string{`use pending, firing or resolved`}},
		{"ack", []string{"ack", "a1"}, "", 0, []string{`^acknowledged a1$`}, nil},
		{"ack unknown", []string{"ack", "zz"}, "", 3, nil, []string{`^apollo: no such thing$`}},
		{"ack resolved", []string{"ack", "a2"}, "", 2, nil, []string{`^apollo: alert a2 is resolved \(nothing to acknowledge\)$`}},
		{"silence list", []string{"silence", "list"}, "", 0, []string{
			`^ID +MATCHES +STARTS +ENDS +BY +COMMENT$`,
			`^s1 +prefix=etl_ env=prod team=data +2026-11-29 10:00:00 +2026-11-29 12:00:00 +ops +vendor outage$`}, nil},
		{"silence add", []string{"silence", "add", "--rule", "batch_failures", "--for", "2h", "--comment", "c"}, "", 0,
			[]string{`^silence s2: rule=batch_failures until 2026-11-29 12:00:00$`}, nil},
		{"silence rm", []string{"silence", "rm", "s1"}, "", 0, []string{`^removed silence s1$`}, nil},
		{"silence rm unknown", []string{"silence", "rm", "zz"}, "", 3, nil, nil},
		{"silence add bad label", []string{"silence", "add", "--label", "novalue", "--for", "1h", "--comment", "c"}, "", 2, nil, []string{`write key=value`}},
		{"rules list", []string{"rules", "list"}, "", 0, []string{`^NAME +KIND +RULE$`, `^batch_failures +rate +RULE batch_failures task_prefix: "batch_" WINDOW: 5m$`}, nil},
		{"rules source", []string{"rules", "list", "--source"}, "", 0, []string{`^# ours$`}, nil},
		{"rules apply errors", []string{"rules", "apply", rulesFile}, "", 2, nil, []string{
			`^apollo: .*rules.txt: 2 errors; nothing was changed$`,
			`^.*rules.txt:1:49: unknown metric "failed_rat" \(did you mean failed_rate\?\)$`,
			`^.*rules.txt:2:3: unknown key$`}},
		{"rules apply json", []string{"rules", "apply", goodFile}, "", 0, []string{`^applied .*rules.json: 2 rules$`}, nil},
		{"rules apply stdin", []string{"rules", "apply", "-"}, "RULE x", 0, []string{`^applied <stdin>: 2 rules$`}, nil},
		{"expect show", []string{"expect", "show"}, "", 0, []string{`^# our expectations$`, `^jobs: \{\}$`}, nil},
		{"expect show json", []string{"expect", "show", "-o", "json"}, "", 0, []string{`^  "count": 1$`}, nil},
		{"expect apply", []string{"expect", "apply", expectFile}, "", 0, []string{`^applied .*expectations.yaml: 2 expectations$`}, nil},
		{"expect apply errors", []string{"expect", "apply", "-"}, "bad", 2, nil, []string{
			`^apollo: <stdin>: 1 error; nothing was changed$`, `^<stdin>:3:5: job "x": grace: not a duration$`}},
		{"expect suggest", []string{"expect", "suggest"}, "", 0, []string{
			`^JOB +PROPOSAL +CONFIDENCE +RUNS +GRACE +MAX_RUNTIME +MIN_RUNTIME$`,
			`^nightly +daily at 02:00 +0\.93 +21 +10m +1h +-$`}, nil},
		{"expect suggest json", []string{"expect", "suggest", "-o", "json"}, "", 0, []string{`^  "suggestions": \[$`}, nil},
		{"expect suggest none", []string{"expect", "suggest", "nope"}, "", 3, nil, []string{`^apollo: no proposal for nope yet`}},
		{"expect accept", []string{"expect", "suggest", "nightly", "--accept"}, "", 0,
			[]string{`^accepted: nightly now has the proposed expectation \(3 expectations in all\)$`}, nil},
		{"expect accept no job", []string{"expect", "suggest", "--accept"}, "", 2, nil, []string{`--accept needs the JOB`}},
		{"expect bad output", []string{"expect", "show", "-o", "yaml"}, "", 2, nil, []string{`-o "yaml": use table or json`}},
		{"status not ready", []string{"status"}, "", 1, []string{
			`^health +ok$`, `^ready +recovering$`, `^bus\.queued +\[\]$`, `^bus\.tasks +1000000$`,
			`^stream\.clients +-$`, `^wal\.fsync +batch$`, `^wal\.segments +2$`}, []string{`is not ready: recovering`}},
		{"a route the server lacks", []string{"job", "list"}, "", 1, nil, []string{`does not serve GET /api/v1/jobs`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := cli(t, srv.URL, tc.stdin, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			for _, re := range tc.stdout {
				if !regexp.MustCompile("(?m)" + re).MatchString(out) {
					t.Errorf("stdout has no line matching %s:\n%s", re, out)
				}
			}
			for _, re := range tc.stderr {
				if !regexp.MustCompile("(?m)" + re).MatchString(errs) {
					t.Errorf("stderr has no line matching %s:\n%s", re, errs)
				}
			}
		})
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	want := map[string]any{"rule": "batch_failures", "duration": "2h0m0s", "comment": "c"}
	got, _ := api.bodies["POST /api/v1/silences"].(map[string]any)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("silence body %v, want %s = %v", got, k, v)
		}
	}
	if !strings.Contains(strings.Join(api.requests, "\n"), "GET /api/v1/alerts?state=firing") {
		t.Errorf("--state not sent: %v", api.requests)
	}
}

func TestResolveCLIOrder(t *testing.T) {
	cleanEnv(t)
	dir := os.Getenv("XDG_CONFIG_HOME")
	os.MkdirAll(filepath.Join(dir, "apollo"), 0o700)
	os.WriteFile(filepath.Join(dir, "apollo", "cli.yaml"), []byte("server: http://file:1969\ntoken: file-token\n"), 0o600)
	tests := []struct {
		name                string
		flagServer, flagTok string
		envServer, envTok   string
		wantServer, wantTok string
	}{
		{"file only", "", "", "", "", "http://file:1969", "file-token"},
		{"env beats file", "", "", "http://env:1", "env-token", "http://env:1", "env-token"},
		{"flag beats env", "http://flag:1", "flag-token", "http://env:1", "env-token", "http://flag:1", "flag-token"},
		{"file token stays with its server", "http://other:1", "", "", "", "http://other:1", ""},
		{"file token with its server named by a flag", "http://file:1969/", "", "", "", "http://file:1969/", "file-token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("APOLLO_SERVER", tc.envServer)
			t.Setenv("APOLLO_TOKEN", tc.envTok)
			cf := clientFlags{server: tc.flagServer, token: tc.flagTok}
			if err := cf.resolveCLI(); err != nil {
				t.Fatal(err)
			}
			if cf.server != tc.wantServer || cf.token != tc.wantTok {
				t.Errorf("got %s %q, want %s %q", cf.server, cf.token, tc.wantServer, tc.wantTok)
			}
		})
	}
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vals []float64
		has  []bool
		want string
	}{
		{"empty", nil, nil, ""},
		{"all zero", []float64{0, 0, 0}, nil, "▁▁▁"},
		{"scaled to the top", []float64{0, 1, 2, 4, 8}, nil, "▁▁▂▄█"},
		{"nothing measured is blank", []float64{0, 0.5, 1}, []bool{false, true, true}, " ▄█"},
	}
	for _, tc := range tests {
		if got := sparkline(tc.vals, tc.has); got != tc.want {
			t.Errorf("%s: sparkline(%v) = %q, want %q", tc.name, tc.vals, got, tc.want)
		}
	}
}

func TestExitFor(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]int{400: 2, 401: 4, 403: 4, 404: 3, 409: 2, 413: 2, 415: 2, 429: 1, 500: 1, 503: 1} {
		if got := exitFor(apiclient.CodeOf(status)); got != want {
			t.Errorf("exitFor(%d) = %d, want %d", status, got, want)
		}
	}
}

func TestReadCLIConfigForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       cliConfig
		wantErr    string // "" for none
	}{
		{"empty", "", cliConfig{}, ""},
		{"comments only", "# nothing yet\n", cliConfig{}, ""},
		{"both keys", "server: http://s:1\ntoken: t\n", cliConfig{Server: "http://s:1", Token: "t"}, ""},
		{"misspelled server", "sever: http://s:1\ntoken: t\n", cliConfig{}, `cli.yaml:1:1: unknown key "sever"`},
		{"misspelled token", "server: http://s:1\n  \ntokn: t\n", cliConfig{}, `cli.yaml:3:1: unknown key "tokn"`},
		{"not a mapping", "- server\n", cliConfig{}, "cli.yaml: yaml: unmarshal errors"},
		{"not YAML", "server: [x\n", cliConfig{}, "cli.yaml: yaml: "},
		{"control character", "server: \"http://s\x1b:1\"\n", cliConfig{}, `cli.yaml:1:18: a control character (U+001B) is not allowed in a CLI configuration file`},
		{"not UTF-8", "token: t\xff\n", cliConfig{}, `cli.yaml:1:9: a byte that is not UTF-8 (0xFF)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cli.yaml")
			os.WriteFile(path, []byte(tc.text), 0o600)
			got, err := readCLIConfig(path)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), "(write server: URL and token: SECRET)"):
				t.Errorf("error %v says not what to write", err)
			case got != tc.want:
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseCLIConfig: cli.yaml's parser never panics, and each error
// names the file and says what to write; a character YAML refuses is
// placed at its line and column.
func FuzzParseCLIConfig(f *testing.F) {
	for _, s := range []string{"", "# nothing yet\n", "server: http://s:1\ntoken: t\n", "sever: x\n", "- server\n", "server: [x\n",
		"server: \"http://s\x1b:1\"\n", "token: t\xff\n", "server: &a x\ntoken: *a\n", "server: {a: b}\n", "\x00"} {
		f.Add([]byte(s))
	}
	placed := regexp.MustCompile(`^cli\.yaml:\d+:\d+: `)
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := parseCLIConfig("cli.yaml", src)
		if err == nil {
			return
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "cli.yaml:") || !strings.Contains(msg, "(write server: URL and token: SECRET)") {
			t.Fatalf("parseCLIConfig(%q) = %v: the file or what to write is missing", src, err)
		}
		if sourcefile.Refused(err.Error()) && sourcefile.BadChar(src, "a CLI configuration file") != nil && !placed.MatchString(err.Error()) {
			t.Fatalf("parseCLIConfig(%q) = %v: a refused character without its place", src, err)
		}
	})
}

func TestDefaultTaskIDFits(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"nightly", strings.Repeat("j", apollo.MaxNameBytes), strings.Repeat("作", 85), strings.Repeat("é", 128)} {
		for _, pid := range []int{1, 12345, 4194304} {
			id := defaultTaskID(name, 1796327479581, pid)
			ev := apollo.Event{TaskID: id, Name: name, Sequence: 1, Status: apollo.StatusPending, Ts: apollo.MinTs}
			if err := ev.Validate(); err != nil {
				t.Errorf("name of %d bytes, pid %d: %v", len(name), pid, err)
			}
			if prefix, _, _ := strings.Cut(id, "@exec-"); !strings.HasPrefix(name, prefix) || len(prefix) < len(name)-len("@exec-1796327479581-4194304")-2 {
				t.Errorf("name of %d bytes, pid %d: task ID %q does not start with as much of the name as fits", len(name), pid, id)
			}
		}
	}
	if got := defaultTaskID("nightly", 5, 7); got != "nightly@exec-5-7" {
		t.Errorf("short name: %q", got)
	}
}
