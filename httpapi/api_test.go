package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
)

func newTestServer(t testing.TB, edit func(*bus.Options)) (*httptest.Server, *bus.Bus) {
	t.Helper()
	o := bus.Options{Workers: 1, Logger: discardLogger}
	if edit != nil {
		edit(&o)
	}
	b, err := bus.New(o)
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	srv := httptest.NewServer(New(Options{Bus: b}))
	t.Cleanup(srv.Close)
	return srv, b
}

// tenantTokens makes a token for each role in tenants "a" and "b" and
// returns their authenticator and secrets by "role/tenant".
func tenantTokens(t *testing.T, roles ...Role) (*TokenAuth, map[string]string) {
	t.Helper()
	secrets := map[string]string{}
	var toks []Token
	for _, tenant := range []string{"a", "b"} {
		for _, role := range roles {
			secret, tok, err := NewToken(role.String()+"-"+tenant, role, tenant)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok)
			secrets[role.String()+"/"+tenant] = secret
		}
	}
	return NewTokenAuth(toks), secrets
}

func post(t *testing.T, url, ctype, body string) (*http.Response, []byte) {
	t.Helper()
	return send(t, "POST", url, ctype, body)
}

// send makes one request with body (of Content-Type ctype, if set) and
// returns the answer with its body read.
func send(t *testing.T, method, url, ctype, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestIngestAnswers(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, nil)
	url := srv.URL + "/api/v1/events"
	tests := []struct {
		name, ctype, body string
		status            int
		results           []string
		errField          string
		offset            int64
	}{
		{"one object", "application/json", `{"taskID":"a","sequence":1,"status":"running","ts":1700000000000}`, 200, []string{"accepted"}, "", 0},
		{"array with a duplicate and a bad one", "application/json",
			`[{"taskID":"a","sequence":1,"status":"running","ts":1700000000000},
			  {"taskID":"a","sequence":2,"status":"success","ts":1700000001000},
			  {"taskID":"b","sequence":0,"status":"running","ts":1700000000000},
			  {"taskID":"c","sequence":1,"status":"done","ts":1700000000000},
			  {"taskID":"d","sequence":"1","status":"running","ts":1700000000000}]`,
			200, []string{"duplicate", "accepted", "rejected", "rejected", "rejected"}, "", 0},
		{"ndjson", "application/x-ndjson", "{\"taskID\":\"n\",\"sequence\":1,\"status\":\"pending\",\"ts\":1764400000001}\n\n{\"taskID\":\"n\",\"sequence\":2,\"status\":\"running\",\"ts\":1764400000002}\n", 200, []string{"accepted", "accepted"}, "", 0},
		{"ndjson with a broken line", "application/x-ndjson", "{\"taskID\":\"m\",\"sequence\":1,\"status\":\"pending\",\"ts\":1764400000001}\n{\"taskID\":\n", 200, []string{"accepted", "rejected"}, "", 0},
		{"no content type is JSON", "", `{"taskID":"e","sequence":1,"status":"pending","ts":1764400000001}`, 200, []string{"accepted"}, "", 0},
		{"illegal transition", "application/json", `{"taskID":"a","sequence":3,"status":"running","ts":1700000002000}`, 200, []string{"rejected"}, "", 0},
		{"malformed", "application/json", `[{"taskID":"a",}]`, 400, nil, "", 15},
		{"empty", "application/json", ``, 400, nil, "", 0},
		{"form", "application/x-www-form-urlencoded", `a=b`, 415, nil, "Content-Type", 0},
		{"curl -d default type with JSON", "application/x-www-form-urlencoded", ` {"taskID":"f","sequence":1,"status":"pending","ts":1764400000001}`, 200, []string{"accepted"}, "", 0},
		{"extra not an object", "application/json", `{"taskID":"x","sequence":1,"status":"pending","ts":1764400000001,"extra":[1]}`, 200, []string{"rejected"}, "", 0},
	}
	for _, tt := range tests { // in order: later cases depend on earlier ones
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, url, tt.ctype, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.results == nil {
				var eb struct{ Error apollo.Error }
				if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Message == "" {
					t.Fatalf("error body %s", body)
				}
				if eb.Error.Field != tt.errField || eb.Error.Offset != tt.offset {
					t.Fatalf("error %+v, want field %q offset %d", eb.Error, tt.errField, tt.offset)
				}
				return
			}
			var ans ingestAnswer
			if err := json.Unmarshal(body, &ans); err != nil {
				t.Fatal(err)
			}
			if len(ans.Results) != len(tt.results) {
				t.Fatalf("results %s", body)
			}
			for i, want := range tt.results {
				if ans.Results[i].Result != want {
					t.Errorf("event %d: %s, want %s (%+v)", i, ans.Results[i].Result, want, ans.Results[i].Error)
				}
				if want == "rejected" && (ans.Results[i].Error == nil || ans.Results[i].Error.Message == "") {
					t.Errorf("event %d rejected without a reason", i)
				}
			}
		})
	}
}

func TestIngestRejectionsNameTheField(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, nil)
	_, body := post(t, srv.URL+"/api/v1/events", "application/json",
		`[{"sequence":1,"status":"running","ts":1764400000001},{"taskID":"d","sequence":"1","status":"running","ts":1764400000001},{"taskID":"x","sequence":1,"status":"nope","ts":1764400000001},{"taskID":"y","sequence":1,"status":"pending"}]`)
	var ans ingestAnswer
	json.Unmarshal(body, &ans)
	for i, field := range []string{"taskID", "sequence", "status", "ts"} {
		if e := ans.Results[i].Error; e == nil || e.Field != field {
			t.Errorf("event %d: error %+v, want field %s", i, e, field)
		}
	}
}

func TestIngestLimits(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, nil)
	big := `[` + strings.Repeat(`{"taskID":"a","sequence":1,"status":"pending","ts":1764400000001},`, 90_000) + `{}]`
	resp, _ := post(t, srv.URL+"/api/v1/events", "application/json", big)
	if resp.StatusCode != 413 {
		t.Errorf("5 MB body: %d", resp.StatusCode)
	}
}

func TestIngestOverloadIs429(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, func(o *bus.Options) { o.MaxTasks = 1 })
	resp, body := post(t, srv.URL+"/api/v1/events", "application/json",
		`[{"taskID":"a","sequence":1,"status":"pending","ts":1764400000001},{"taskID":"b","sequence":1,"status":"pending","ts":1764400000001}]`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var ans ingestAnswer
	json.Unmarshal(body, &ans)
	if ans.Accepted != 1 || ans.RetryLater != 1 || ans.Results[1].Result != "retry_later" {
		t.Errorf("answer %s", body)
	}
}

func TestTasksAndCorrection(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, nil)
	post(t, srv.URL+"/api/v1/events", "application/json",
		`[{"taskID":"job-1","name":"etl","sequence":1,"status":"running","ts":1764400001000},{"taskID":"job-1","sequence":2,"status":"failed","ts":1764400002000,"extra":{"exitCode":3}}]`)
	resp, err := http.Get(srv.URL + "/api/v1/tasks/job-1")
	if err != nil {
		t.Fatal(err)
	}
	var task apollo.Task
	json.NewDecoder(resp.Body).Decode(&task)
	resp.Body.Close()
	if task.Status != apollo.StatusFailed || len(task.History) != 2 || string(task.History[1].Extra) != `{"exitCode":3}` {
		t.Fatalf("task %+v", task)
	}
	if r, _ := http.Get(srv.URL + "/api/v1/tasks/nope"); r.StatusCode != 404 {
		t.Errorf("unknown task: %d", r.StatusCode)
	}
	r, body := post(t, srv.URL+"/api/v1/tasks/job-1/status", "application/json", `{"status":"success"}`)
	if r.StatusCode != 400 || !strings.Contains(string(body), "reason") {
		t.Errorf("correction without reason: %d %s", r.StatusCode, body)
	}
	r, body = post(t, srv.URL+"/api/v1/tasks/job-1/status", "application/json", `{"status":"success","reason":"checked by hand"}`)
	if r.StatusCode != 200 || !strings.Contains(string(body), `"status":"success"`) {
		t.Errorf("correction: %d %s", r.StatusCode, body)
	}
	resp, _ = http.Get(srv.URL + "/api/v1/tasks?prefix=etl&status=success")
	var page apiclient.TaskPage
	json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	if len(page.Tasks) != 1 || page.Tasks[0].TaskID != "job-1" {
		t.Errorf("list %+v", page)
	}
	if r, _ := http.Get(srv.URL + "/api/v1/tasks?status=bogus"); r.StatusCode != 400 {
		t.Errorf("bad status filter: %d", r.StatusCode)
	}
}

func FuzzDecodeEvents(f *testing.F) {
	f.Add([]byte(`{"taskID":"a","sequence":1,"status":"running","ts":1764400000001}`), false)
	f.Add([]byte(`[{"taskID":"a","sequence":1,"status":"running","ts":1764400000001,"extra":{"k":[1,2]}},{}]`), false)
	f.Add([]byte("{\"taskID\":\"a\"}\n{bad\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		evs, bad, err := decodeEvents(body, ndjson, math.MaxInt)
		if err != nil {
			if apollo.ErrorCode(err) != apollo.EINVALID {
				t.Fatalf("decode error of code %s", apollo.ErrorCode(err))
			}
			return
		}
		if len(evs) != len(bad) || len(evs) == 0 {
			t.Fatalf("%d events, %d errors", len(evs), len(bad))
		}
		for i := range evs {
			if bad[i] == nil && evs[i].Tenant != "" {
				t.Fatal("tenant read from the body")
			}
			if bad[i] != nil && (bad[i].Offset < 0 || bad[i].Offset > int64(len(body))) {
				t.Fatalf("offset %d outside the body", bad[i].Offset)
			}
		}
	})
}

// Every answer says X-Content-Type-Options: nosniff, so that no browser
// reads a JSON answer holding a reporter's text (extra, a task ID) as a
// page: answers, errors, a ping and the Prometheus text.
func TestEveryAnswerIsNotSniffed(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, nil)
	post(t, srv.URL+"/api/v1/events", "application/json",
		`{"taskID":"<script>alert(1)</script>","sequence":1,"status":"running","ts":1764400000000,"extra":{"html":"<img src=x onerror=alert(1)>"}}`)
	for _, path := range []string{
		"/api/v1/tasks/%3Cscript%3Ealert(1)%3C%2Fscript%3E", "/api/v1/tasks/nope", "/api/v1/nowhere",
		"/ping/nightly", "/metrics", "/healthz",
	} {
		resp, _ := send(t, "GET", srv.URL+path, "", "")
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s (%d): X-Content-Type-Options %q, want nosniff", path, resp.StatusCode, got)
		}
	}
}
