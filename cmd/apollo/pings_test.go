package main

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

// ping requests a ping URL as tenant and returns the run it answered.
func (d *deployment) ping(tenant, path string) string {
	d.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.api.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+d.tokens[tenant])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), "OK ") {
		d.t.Fatalf("%s as %s: %d %s", path, tenant, resp.StatusCode, b)
	}
	return strings.TrimSpace(strings.TrimPrefix(string(b), "OK "))
}

// Runs started with ping URLs are still open after kill -9, in both
// tenants with the same job names, in every mode: their ends pair with
// them (the server finds them through the bus's index rebuilt from the
// log, no cache of the API's), and each tenant's listing pages through
// its own runs, newest first.
func TestPingsSurviveKill(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, _ *hook) {
		started := map[string][]string{}
		for _, tenant := range tenants {
			started[tenant] = []string{d.ping(tenant, "/ping/backup/start"), d.ping(tenant, "/ping/nightly/start")}
		}
		d.crash()
		for _, tenant := range []string{tenants[1], tenants[0]} {
			if got := d.ping(tenant, "/ping/nightly/fail"); got != started[tenant][1] {
				t.Errorf("tenant %s: the nightly end after kill -9 paired with %s, want %s", tenant, got, started[tenant][1])
			}
			if got := d.ping(tenant, "/ping/backup"); got != started[tenant][0] {
				t.Errorf("tenant %s: the backup end after kill -9 paired with %s, want %s", tenant, got, started[tenant][0])
			}
			var task apollo.Task
			d.do(tenant, "GET", "/api/v1/tasks/"+started[tenant][0], "", &task, 200)
			if task.Status != apollo.StatusSuccess || len(task.History) != 2 {
				t.Errorf("tenant %s: %s is %s with %d records, want a success after its start", tenant, task.TaskID, task.Status, len(task.History))
			}
			var listed []apollo.Task
			for cursor := ""; ; {
				var page struct {
					Tasks []apollo.Task
					Next  string
				}
				d.do(tenant, "GET", "/api/v1/tasks?limit=1&cursor="+cursor, "", &page, 200)
				listed = append(listed, page.Tasks...)
				if cursor = page.Next; cursor == "" {
					break
				}
			}
			if len(listed) != 2 || !slices.Contains(started[tenant], listed[0].TaskID) || !slices.Contains(started[tenant], listed[1].TaskID) ||
				listed[0].TaskID == listed[1].TaskID || listed[0].CreatedAt < listed[1].CreatedAt ||
				listed[0].CreatedAt == listed[1].CreatedAt && listed[0].TaskID < listed[1].TaskID {
				t.Errorf("tenant %s lists %+v, want its two runs %v, newest first", tenant, listed, started[tenant])
			}
		}
	})
}
