package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// getJSON GETs url into v and returns the status code.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// scrape returns the server's /metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Issue 15.1 end to end: an event ahead of missing ones is answered
// waiting (and counted); when the reorder window ends without them the run
// takes the state its reporter said last, its history marks the gap, and
// the metrics count the run. A kill -9 and a restart replay the same. It
// used to be answered accepted and dropped.
func TestWaitingEventAppliesWhenTheWindowEnds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "apollo.yaml")
	if err := os.WriteFile(cfg, []byte("retention:\n  reorder: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "--config", cfg, "--data", filepath.Join(dir, "data"), "--listen", freeAddr(t)}
	srv := startApollo(t, args...)
	now := time.Now().UnixMilli()
	body := fmt.Sprintf(`[{"taskID":"rep-5","name":"nb_report","sequence":1,"status":"pending","ts":%d},
		{"taskID":"rep-5","sequence":4,"status":"success","ts":%d,"costMs":3}]`, now, now+5)
	resp, err := http.Post("http://"+srv.addr+"/api/v1/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Results           []struct{ Result string }
		Accepted, Waiting int
	}
	json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if len(ans.Results) != 2 || ans.Results[0].Result != "accepted" || ans.Results[1].Result != "waiting" || ans.Waiting != 1 {
		t.Fatalf("answer %+v", ans)
	}
	if m := scrape(t, srv.addr); !strings.Contains(m, "\napollo_events_waiting_total 1\n") {
		t.Errorf("/metrics does not count the waiting event")
	}

	// The server's deadline loop ends the wait about a second later.
	url := "http://" + srv.addr + "/api/v1/tasks/rep-5"
	var task apollo.Task
	eventually(t, 0, "the waiting event applies", func() bool {
		return getJSON(t, url, &task) == http.StatusOK && task.Status == apollo.StatusSuccess
	})
	check := func(when string, task apollo.Task) {
		t.Helper()
		if task.Status != apollo.StatusSuccess || task.Sequence != 4 || task.CostMs != 3 || len(task.History) != 2 {
			t.Fatalf("%s: %+v", when, task)
		}
		if g := task.History[1]; g.Kind != apollo.KindGap || g.Reason != "2 earlier events never arrived" {
			t.Errorf("%s: the history does not mark the gap: %+v", when, g)
		}
		var m struct {
			Jobs []struct {
				Name           string
				Count, Success int64
			}
		}
		getJSON(t, "http://"+srv.addr+"/api/v1/metrics?window=1h&prefix=nb_report", &m)
		if len(m.Jobs) != 1 || m.Jobs[0].Count != 1 || m.Jobs[0].Success != 1 {
			t.Errorf("%s: metrics %+v, want the run counted once, as a success", when, m.Jobs)
		}
	}
	check("after the window", task)
	if m := scrape(t, srv.addr); !strings.Contains(m, "\napollo_events_wait_ended_total 1\n") {
		t.Errorf("/metrics does not count the wait that ended")
	}

	srv.kill()
	srv = startApollo(t, args...)
	task = apollo.Task{}
	if code := getJSON(t, "http://"+srv.addr+"/api/v1/tasks/rep-5", &task); code != http.StatusOK {
		t.Fatalf("after kill -9: status %d", code)
	}
	check("after kill -9 and a restart", task)
}
