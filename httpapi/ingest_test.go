package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postAnswer posts body to /api/v1/events and decodes the answer.
func postAnswer(t *testing.T, url, ctype, body string) (int, ingestAnswer) {
	t.Helper()
	resp, b := post(t, url+"/api/v1/events", ctype, body)
	var ans ingestAnswer
	json.Unmarshal(b, &ans)
	return resp.StatusCode, ans
}

// Issue 16.13: "\ud800" and "\udc00" both became U+FFFD, so two different
// task IDs were one task (the second answered duplicate). An ID with half
// a surrogate pair is refused; a whole pair is one character.
func TestLoneSurrogateIDsRefused(t *testing.T) {
	t.Parallel()
	srv, b := newTestServer(t, nil)
	code, ans := postAnswer(t, srv.URL, "application/json", `[`+
		`{"taskID":"run-\ud800","sequence":1,"status":"running","ts":1764400000000},`+
		`{"taskID":"run-\udc00","sequence":1,"status":"running","ts":1764400000000},`+
		`{"taskID":"run-x","name":"job-\udbff","sequence":1,"status":"running","ts":1764400000000},`+
		`{"taskID":"run-\ud83d\ude00","sequence":1,"status":"running","ts":1764400000000}]`)
	if code != 200 || len(ans.Results) != 4 {
		t.Fatalf("HTTP %d, %+v", code, ans)
	}
	for i, field := range []string{"taskID", "taskID", "name"} {
		if r := ans.Results[i]; r.Result != "rejected" || r.Error == nil || r.Error.Field != field || r.Error.Hint == "" {
			t.Errorf("event %d: %+v, want refused on %s with a hint", i, r, field)
		}
	}
	if r := ans.Results[3]; r.Result != "accepted" {
		t.Errorf("an escaped surrogate pair: %+v", r)
	}
	if _, err := b.Get("", "run-\U0001F600"); err != nil {
		t.Errorf("the run with an emoji: %v", err)
	}
	if _, err := b.Get("", "run-\uFFFD"); err == nil {
		t.Error("a lone surrogate became a task named with U+FFFD")
	}
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Issue 16.13: a gzip body was answered "400 malformed JSON". It is now
// read when Content-Encoding says gzip, with the body limit holding for the
// inflated bytes too; without the header it is refused with a hint.
func TestGzipBodies(t *testing.T) {
	t.Parallel()
	srv, b := newTestServer(t, nil)
	events := "{\"taskID\":\"gz-1\",\"sequence\":1,\"status\":\"running\",\"ts\":1764400000000}\n{\"taskID\":\"gz-2\",\"sequence\":1,\"status\":\"pending\",\"ts\":1764400000000}\n"
	tests := []struct {
		name, encoding, body string
		status               int
		field, says          string
	}{
		{"gzip", "gzip", gzipped(t, events), 200, "", ""},
		{"x-gzip, any case", " X-Gzip", gzipped(t, events), 200, "", ""},
		{"gzip without the header", "", gzipped(t, events), 415, "Content-Encoding", "Content-Encoding: gzip"},
		{"another encoding", "br", events, 415, "Content-Encoding", "gzip"},
		{"not gzip", "gzip", events, 400, "Content-Encoding", "not valid gzip"},
		{"cut short", "gzip", gzipped(t, events)[:30], 400, "Content-Encoding", "not valid gzip"},
		{"a bomb", "gzip", gzipped(t, "\n"+strings.Repeat(" ", 5<<20)), 413, "", "inflates to more than 4194304 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/api/v1/events", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("HTTP %d %s, want %d", resp.StatusCode, raw, tt.status)
			}
			if tt.status == 200 {
				var ans ingestAnswer
				if json.Unmarshal(raw, &ans); len(ans.Results) != 2 || ans.Rejected != 0 {
					t.Fatalf("answer %s", raw)
				}
				return
			}
			var eb errorBody
			json.Unmarshal(raw, &eb)
			if eb.Error == nil || eb.Error.Field != tt.field || !strings.Contains(eb.Error.Message+" "+eb.Error.Hint, tt.says) {
				t.Errorf("error %s, want field %q saying %q", raw, tt.field, tt.says)
			}
		})
	}
	for _, id := range []string{"gz-1", "gz-2"} {
		if _, err := b.Get("", id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}
