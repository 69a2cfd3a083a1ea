package httpapi

import (
	"encoding/json"
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
