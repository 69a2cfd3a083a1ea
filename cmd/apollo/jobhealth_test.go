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

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// healthJob is the part of a job on the health board these tests read.
type healthJob struct {
	Name    string
	Verdict string
	Runs    []struct{ TaskID, Status string }
}

// The job health board and the job exposition come back after a restart
// as they were: after a clean stop (from the snapshot) and after kill -9
// (from the log), in each of two tenants.
func TestJobHealthSurvivesRestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	secrets := map[string]string{}
	for _, tenant := range []string{"team-a", "team-b"} {
		for _, role := range []httpapi.Role{httpapi.RoleAgent, httpapi.RoleViewer} {
			secret, tok, err := httpapi.NewToken(tenant+"-"+role.String(), role, tenant)
			if err != nil {
				t.Fatal(err)
			}
			secrets[tenant+"/"+role.String()] = secret
			cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: tok.Name, Role: role.String(), Tenant: tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
		}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "apollo.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "--config", file}
	srv := startApollo(t, args...)

	do := func(method, path, tenant, role, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+srv.addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[tenant+"/"+role])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	now := time.Now().UnixMilli()
	run := func(tenant, id, status string, start int64) {
		t.Helper()
		body := fmt.Sprintf(`[{"taskID":%q,"name":"etl","sequence":1,"status":"running","ts":%d},{"taskID":%q,"name":"etl","sequence":2,"status":%q,"ts":%d}]`,
			id, start, id, status, start+2000)
		if st, out := do("POST", "/api/v1/events", tenant, "agent", body); st != 200 || strings.Count(out, `"result":"accepted"`) != 2 {
			t.Fatalf("reporting %s: %d %s", id, st, out)
		}
	}
	board := func(tenant string) (healthJob, string) {
		t.Helper()
		st, out := do("GET", "/api/v1/jobs/health", tenant, "viewer", "")
		var ans struct{ Jobs []healthJob }
		if err := json.Unmarshal([]byte(out), &ans); st != 200 || err != nil || len(ans.Jobs) != 1 {
			t.Fatalf("the board of %s: %d %s", tenant, st, out)
		}
		_, exp := do("GET", "/metrics/jobs", tenant, "viewer", "")
		return ans.Jobs[0], exp
	}
	// want waits until tenant's etl has the verdict and runs given, on the
	// board and in the exposition: the metrics see a change a moment after
	// its answer.
	want := func(when, tenant, verdict string, runs ...string) {
		t.Helper()
		up := "0"
		if verdict == "ok" {
			up = "1"
		}
		eventually(t, 20*time.Second, fmt.Sprintf("%s: %s's etl %s with runs %v", when, tenant, verdict, runs), func() bool {
			j, exp := board(tenant)
			var got []string
			for _, r := range j.Runs {
				got = append(got, r.TaskID+":"+r.Status)
			}
			return j.Verdict == verdict && strings.Join(got, " ") == strings.Join(runs, " ") &&
				strings.Contains(exp, `apollo_job_up{job="etl"} `+up+"\n")
		})
	}

	run("team-a", "a1", "success", now-60_000)
	run("team-a", "a2", "failed", now-30_000)
	run("team-b", "b1", "success", now-30_000)
	want("before the restart", "team-a", "failing", "a1:success", "a2:failed")
	want("before the restart", "team-b", "ok", "b1:success")

	srv.term(t) // a clean stop writes the final snapshot
	srv = startApollo(t, args...)
	want("after a clean restart", "team-a", "failing", "a1:success", "a2:failed")
	want("after a clean restart", "team-b", "ok", "b1:success")

	run("team-a", "a3", "success", now-10_000)
	want("after a new success", "team-a", "ok", "a1:success", "a2:failed", "a3:success")
	srv.kill()
	srv = startApollo(t, args...)
	want("after kill -9", "team-a", "ok", "a1:success", "a2:failed", "a3:success")
	want("after kill -9", "team-b", "ok", "b1:success")
}
