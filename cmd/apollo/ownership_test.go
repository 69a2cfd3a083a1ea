package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// The two attacks of issue 16.5, end to end through the server, by an
// agent token limited to the job prefix "backup": it can neither change a
// payroll run (naming its own job or none), nor, by claiming a payroll
// task ID first with a huge sequence, make the payroll reporter's events
// vanish as duplicates: that reporter is told the ID belongs to another
// job. A live task's sequence cannot be pushed to the end of its range.
func TestPrefixTokenCannotTouchAnotherJobsRuns(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	tokens := map[string]string{}
	for _, tk := range []struct{ name, role, prefix string }{
		{"payroll-agent", "agent", ""}, {"backup-ping", "agent", "backup"}, {"ops", "admin", ""},
	} {
		role, err := httpapi.ParseRole(tk.role)
		if err != nil {
			t.Fatal(err)
		}
		secret, h, err := httpapi.NewToken(tk.name, role, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[tk.name] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: tk.name, Role: tk.role, SHA256: fmt.Sprintf("%x", h.Hash), JobPrefix: tk.prefix})
	}
	addr, _, _ := inProcess(t, cfg)
	send := func(token, event string) (result string, e *apollo.Error) {
		t.Helper()
		st, rs := ingest(t, addr, tokens[token], event)
		if st != http.StatusOK || len(rs) != 1 {
			t.Fatalf("POST %s: %d %+v", event, st, rs)
		}
		return rs[0].Result, rs[0].Error
	}
	task := func(id string) apollo.Task {
		t.Helper()
		var tk apollo.Task
		if st, body := apiCall(t, addr, tokens["ops"], "GET", "/api/v1/tasks/"+id, ""); st != http.StatusOK || json.Unmarshal(body, &tk) != nil {
			t.Fatalf("GET %s: %d %s", id, st, body)
		}
		return tk
	}
	ts := time.Now().UnixMilli()
	ev := func(id, name string, seq int64, status string) string {
		e := fmt.Sprintf(`{"taskID":%q,"sequence":%d,"status":%q,"ts":%d`, id, seq, status, ts)
		if name != "" {
			e += fmt.Sprintf(`,"name":%q`, name)
		}
		return e + "}"
	}

	// 1. The payroll run is running; the backup token tries to end it.
	if r, e := send("payroll-agent", ev("payroll-2026-12-01", "payroll", 1, "running")); r != "accepted" {
		t.Fatalf("payroll start: %s %v", r, e)
	}
	if r, e := send("backup-ping", ev("payroll-2026-12-01", "backup_x", 2, "success")); r != "rejected" || e.Code != apollo.ECONFLICT || e.Field != "name" {
		t.Errorf("naming its own job: %s %+v", r, e)
	}
	if r, e := send("backup-ping", ev("payroll-2026-12-01", "", 2, "success")); r != "rejected" || e.Code != apollo.EFORBIDDEN {
		t.Errorf("naming no job: %s %+v", r, e)
	}
	if got := task("payroll-2026-12-01"); got.Status != apollo.StatusRunning || got.Name != "payroll" {
		t.Fatalf("the payroll run was changed: %+v", got)
	}

	// 2. The backup token claims a future payroll ID with the last sequence.
	if r, e := send("backup-ping", ev("payroll-2026-12-02", "backup_x", apollo.MaxSequence, "manual_blocked")); r != "accepted" {
		t.Fatalf("the claim (a new task of its own job): %s %v", r, e)
	}
	for seq, st := range []string{"running", "failed"} {
		r, e := send("payroll-agent", ev("payroll-2026-12-02", "payroll", int64(seq+1), st))
		if r != "rejected" || e.Field != "name" || !strings.Contains(e.Message, `belongs to job "backup_x"`) {
			t.Errorf("the payroll reporter's %s: %s %+v; want a refusal that says the ID was taken", st, r, e)
		}
	}

	// 3. Its own live runs: one event cannot push the sequence to the end.
	send("backup-ping", ev("backup-1", "backup_db", 1, "running"))
	if r, e := send("backup-ping", ev("backup-1", "", apollo.MaxSequence, "manual_blocked")); r != "rejected" || e.Field != "sequence" {
		t.Errorf("a huge jump: %s %+v", r, e)
	}
	if r, e := send("backup-ping", ev("backup-1", "", 2, "success")); r != "accepted" {
		t.Errorf("its run's next event: %s %+v", r, e)
	}
	if got := task("backup-1"); got.Status != apollo.StatusSuccess || got.Sequence != 2 {
		t.Errorf("backup-1 = %+v", got)
	}
}

// apiCall sends a request with a bearer token to the server at addr and
// returns the status and the body.
func apiCall(t *testing.T, addr, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ingestResult is one event's answer.
type ingestResult struct {
	Result string
	Error  *apollo.Error
}

// ingest POSTs events with a token and returns the status and the answers.
func ingest(t *testing.T, addr, token, body string) (int, []ingestResult) {
	t.Helper()
	st, b := apiCall(t, addr, token, "POST", "/api/v1/events", body)
	var ans struct{ Results []ingestResult }
	if err := json.Unmarshal(b, &ans); err != nil {
		t.Fatalf("POST %s: %d %s", body, st, b)
	}
	return st, ans.Results
}
