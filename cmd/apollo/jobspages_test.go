package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// The server answers GET /api/v1/metrics a page of 10 000 jobs at a time;
// apollo jobs lists every job all the same. Tenant acme has one job more
// than a page, tenant globex three: before the client read on, acme's
// table stopped at the 10 000th job without a word.
func TestJobsListsEveryPageOfJobs(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	cfg.Limits.IngestPerSec = 0
	secrets := figureTokens(t, &cfg, "acme admin acme", "globex admin globex")
	addr, _, _ := inProcess(t, cfg)
	jobs := map[string]int{"acme": 10_001, "globex": 3}
	ts := time.Now().UnixMilli()
	for tenant, n := range jobs {
		for first := 0; first < n; first += 5000 {
			var body bytes.Buffer
			body.WriteByte('[')
			for i := first; i < min(n, first+5000); i++ {
				if i > first {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"taskID":"%s-%d","name":"%s_%06d","sequence":1,"status":"running","ts":%d}`, tenant, i, tenant, i, ts)
			}
			body.WriteByte(']')
			req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/events", &body)
			req.Header.Set("Authorization", "Bearer "+secrets[tenant])
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("tenant %s: POST answered %d", tenant, resp.StatusCode)
			}
		}
	}
	for _, tenant := range tenants {
		var page apiclient.MetricsPage
		eventually(t, 0, tenant+"'s jobs listed", func() bool {
			code, out, errOut := cli(t, "http://"+addr, "", "jobs", "-o", "json", "--window", "1h", "--token", secrets[tenant])
			if code != 0 {
				t.Fatalf("tenant %s: apollo jobs exit %d: %s", tenant, code, errOut)
			}
			page = apiclient.MetricsPage{}
			if err := json.Unmarshal([]byte(out), &page); err != nil {
				t.Fatalf("tenant %s: %v: %.300s", tenant, err, out)
			}
			return page.Total.Running >= int64(jobs[tenant]) // every run counted: the listing is complete
		})
		seen := map[string]bool{}
		for _, j := range page.Jobs {
			if !strings.HasPrefix(j.Name, tenant+"_") || seen[j.Name] {
				t.Fatalf("tenant %s lists job %s (twice: %v)", tenant, j.Name, seen[j.Name])
			}
			seen[j.Name] = true
		}
		if len(page.Jobs) != jobs[tenant] || page.Next != "" || page.Total.Running != int64(jobs[tenant]) {
			t.Errorf("tenant %s: %d jobs, next %q, %d running in the total; want %d, none, %d",
				tenant, len(page.Jobs), page.Next, page.Total.Running, jobs[tenant], jobs[tenant])
		}
	}
	code, out, _ := cli(t, "http://"+addr, "", "jobs", "--window", "1h", "--token", secrets["acme"])
	if code != 0 || !strings.Contains(out, "TOTAL (10001 jobs, 1h0m0s)") {
		t.Errorf("apollo jobs' table: exit %d, no line TOTAL (10001 jobs, 1h0m0s) in its last lines: %s", code, out[max(0, len(out)-300):])
	}
}

// GET /api/v1/alerts answers at most 10 000 alerts and says how many
// there are: apollo alerts says when it shows fewer than there are.
func TestAlertsSaysWhenTheListIsCut(t *testing.T) {
	var out strings.Builder
	l := apiclient.AlertList{Alerts: []apiclient.Alert{{}, {}}, Total: 12_345}
	if err := printAlerts(&out, l); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 of 12345 alerts shown") {
		t.Errorf("no word that 2 of 12345 alerts are shown:\n%s", out.String())
	}
	out.Reset()
	l.Total = 2
	printAlerts(&out, l)
	if strings.Contains(out.String(), "shown") {
		t.Errorf("a whole list says it is cut:\n%s", out.String())
	}
}
