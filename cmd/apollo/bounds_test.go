package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// ingestAnswer is the part of POST /api/v1/events' answer these tests read.
type ingestAnswer struct {
	Results []struct {
		Result string        `json:"result"`
		Error  *apollo.Error `json:"error"`
	} `json:"results"`
}

func postEvents(t *testing.T, addr, body string) ingestAnswer {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/api/v1/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans ingestAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: HTTP %d, %v", body, resp.StatusCode, err)
	}
	return ans
}

// Issue 16.1: one event with costMs 5e18 was accepted, every snapshot after
// it was refused on restart, and the server panicked. Values outside the
// documented ranges are refused, per event, with the field; the server
// restarts, after a clean stop (final snapshot) and after kill -9, and what
// was accepted is there and acts.
func TestOutOfRangeEventsDoNotBreakRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"server", "--data", dir, "--listen", "127.0.0.1:0"}
	srv := startApollo(t, args...)
	// Events are dated 5 s ago, so that the finish at now+1.5 s is never in
	// a 10 s window still in the server's future, which a 5m window query
	// leaves out (it did whenever the test started in a window's last 1.5 s).
	now := time.Now().UnixMilli() - 5000
	ans := postEvents(t, srv.addr, fmt.Sprintf(`[{"taskID":"c1","sequence":1,"status":"running","ts":%d},{"taskID":"c1","sequence":2,"status":"success","ts":%d,"costMs":5000000000000000000}]`, now, now))
	if len(ans.Results) != 2 || ans.Results[0].Result != "accepted" || ans.Results[1].Result != "rejected" ||
		ans.Results[1].Error == nil || ans.Results[1].Error.Field != "costMs" {
		t.Fatalf("the issue's payload: %+v, want the running accepted and the cost refused", ans)
	}
	ans = postEvents(t, srv.addr, fmt.Sprintf(`[{"taskID":"c2","sequence":1,"status":"running","ts":%d,"timeoutMs":9223372036854775807},`+
		`{"taskID":"c3","sequence":1,"status":"pending","ts":%d,"scheduledAt":9223372036854775807},`+
		`{"taskID":"c4","sequence":1,"status":"running","ts":%d}]`, now, now, now/1000))
	for i, field := range []string{"timeoutMs", "scheduledAt", "ts"} {
		if r := ans.Results[i]; r.Result != "rejected" || r.Error == nil || r.Error.Field != field {
			t.Errorf("event %d: %+v, want refused on %s", i, r, field)
		}
	}
	if e := ans.Results[2].Error; e == nil || !strings.Contains(e.Message, "seconds") || !strings.Contains(e.Hint, fmt.Sprint(now/1000*1000)) {
		t.Errorf("a ts in seconds: %+v, want the unit named and the value in milliseconds suggested", e)
	}

	srv.term(t) // writes the final snapshot
	srv = startApollo(t, args...)
	if tk := fetchTask(t, "http://"+srv.addr, "c1"); tk.Status != apollo.StatusRunning || len(tk.History) != 1 {
		t.Fatalf("after the restart: c1 %v with %d records, want running with 1", tk.Status, len(tk.History))
	}
	ans = postEvents(t, srv.addr, fmt.Sprintf(`{"taskID":"c1","sequence":2,"status":"success","ts":%d,"costMs":%d}`, now+1500, int64(apollo.MaxDurationMs)))
	if ans.Results[0].Result != "accepted" {
		t.Fatalf("the largest cost: %+v", ans)
	}
	srv.kill()
	srv = startApollo(t, args...)
	if tk := fetchTask(t, "http://"+srv.addr, "c1"); tk.Status != apollo.StatusSuccess || tk.CostMs != apollo.MaxDurationMs {
		t.Fatalf("after kill -9: c1 %v cost %d, want success with cost %d", tk.Status, tk.CostMs, int64(apollo.MaxDurationMs))
	}
	srv.term(t) // a snapshot holding the largest cost
	srv = startApollo(t, args...)
	var m struct {
		Jobs []struct {
			Name      string  `json:"name"`
			Count     int64   `json:"count"`
			AvgCostMs float64 `json:"avgCostMs"`
			MaxCostMs int64   `json:"maxCostMs"`
		} `json:"jobs"`
	}
	if code := apiGet(t, srv.addr, "/api/v1/metrics?window=5m", &m); code != 200 || len(m.Jobs) != 1 {
		t.Fatalf("metrics: HTTP %d, %+v", code, m)
	}
	if j := m.Jobs[0]; j.Name != "c1" || j.Count != 1 || j.AvgCostMs != apollo.MaxDurationMs || j.MaxCostMs != apollo.MaxDurationMs {
		t.Errorf("metrics after the restarts: %+v, want c1's one run of cost %d", j, int64(apollo.MaxDurationMs))
	}
}
