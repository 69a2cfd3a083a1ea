package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// apollo sched is killed (-9) after an attempt failed and its retry was
// set to wait, while the failed attempt's end is still on its way to the
// server (held here by a proxy that never answers it): the restarted
// scheduler settles that attempt too, not only the retry. Before, the
// retry took the attempt's place in the state file as soon as it was
// planned, so the attempt's task stayed running on the server for ever
// (or until its timeout, which it then got instead of failed).
func TestSchedKilledBeforeAFailedAttemptIsDelivered(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte(`jobs:
  - name: flaky_job
    schedule: "@every 1s"
    retries: 1
    retry_backoff: 1h
    shell: "exit 3"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	target, _ := url.Parse("http://" + srv.addr)
	forward := httputil.NewSingleHostReverseProxy(target)
	held := make(chan string, 1)
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var evs, rest []apollo.Event
		json.Unmarshal(body, &evs)
		hold := false
		for _, ev := range evs {
			if ev.Status == apollo.StatusFailed && strings.HasSuffix(ev.TaskID, "#1") {
				once.Do(func() { hold = true; held <- ev.TaskID })
				if hold {
					continue
				}
			}
			rest = append(rest, ev)
		}
		if hold {
			// The events sent with it reach the server; the answer never
			// comes back.
			b, _ := json.Marshal(rest)
			if resp, err := http.Post("http://"+srv.addr+r.URL.Path, "application/json", bytes.NewReader(b)); err == nil {
				resp.Body.Close()
			}
			<-r.Context().Done()
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		forward.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	state := filepath.Join(dir, "sched")
	first := startProc(t, "apollo sched: ", "sched", "--jobs", jobs, "--server", proxy.URL, "--state", state)
	var task string
	select {
	case task = <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no attempt failed within 30 s:\n%s", first.out)
	}
	var tk apollo.Task
	eventually(t, 30*time.Second, "the attempt running on the server", func() bool {
		apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(task), &tk)
		return tk.Status == apollo.StatusRunning
	})
	// The retry is planned (in the state file) before the kill.
	retry := strings.TrimSuffix(task, "#1") + "#2"
	eventually(t, 30*time.Second, "the retry "+retry+" in the state file", func() bool {
		b, _ := os.ReadFile(filepath.Join(state, "sched-state.json"))
		return strings.Contains(string(b), retry)
	})
	first.kill()

	second := startProc(t, "apollo sched: ", "sched", "--jobs", jobs, "--server", "http://"+srv.addr, "--state", state)
	defer func() {
		if t.Failed() {
			t.Logf("first sched:\n%s\nsecond sched:\n%s", first.out, second.out)
		}
	}()
	eventually(t, 30*time.Second, "the failed attempt "+task+" settled", func() bool {
		apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(task), &tk)
		return tk.Status.Final()
	})
	if tk.Status != apollo.StatusFailed {
		t.Errorf("the attempt is %s, want failed", tk.Status)
	}
	var rt apollo.Task
	eventually(t, 30*time.Second, "the retry "+retry+" settled", func() bool {
		return apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(retry), &rt) == 200 && rt.Status == apollo.StatusManualBlocked
	})
	second.term(t)
}

// A retry_backoff over an hour, which the jobs file accepts (up to 365
// days), is the wait before the first retry: the retry's pending event
// says it is due 3 h after the failure. Before, the runtime cut every
// wait to 1 h, so the retry ran two hours before the time the file gave.
func TestRetryBackoffOverAnHourIsHonoured(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte(`jobs:
  - name: slow_retry
    schedule: "@yearly"
    retries: 2
    retry_backoff: 3h
    command: ["false"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startApollo(t, "server", "--data", filepath.Join(dir, "data"), "--jobs", jobs, "--listen", "127.0.0.1:0")
	ans := runJob(t, srv.addr, "slow_retry")
	endedRun(t, srv.addr, ans.TaskID)
	retry := strings.TrimSuffix(ans.TaskID, "#1") + "#2"
	var tk apollo.Task
	eventually(t, 30*time.Second, "the retry "+retry+" pending", func() bool {
		return apiGet(t, srv.addr, "/api/v1/tasks/"+url.PathEscape(retry), &tk) == http.StatusOK && tk.Status == apollo.StatusPending
	})
	ev := tk.History[0].Event
	if wait := time.Duration(ev.ScheduledAt-ev.Ts) * time.Millisecond; wait < 3*time.Hour-time.Minute || wait > 3*time.Hour {
		t.Errorf("the retry is due %v after its pending event, want 3h (retry_backoff)", wait)
	}
}
