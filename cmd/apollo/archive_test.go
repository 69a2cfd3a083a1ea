package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Runs that left memory for the archive (retention.finished) are still
// found after kill -9, per tenant and only by their own tenant, once a
// snapshot was taken without them: the snapshot no longer holds them and
// the log it replaces no longer replays them, so the archive is all there
// is. The archive kept its lines in a buffer of the process until a lookup
// or a clean stop wrote them, and kill -9 lost every run archived since.
func TestArchivedRunsSurviveKill(t *testing.T) {
	eachMode(t, deployOptions{config: "retention:\n  finished: 1s\nsnapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
		ids := map[string]string{}
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_archived")
			ids[tenant] = fmt.Sprintf("%s_archived-%d", tenant, d.seq.Load())
		}
		// No lookup before the kill: a lookup writes the archive's buffer.
		eventually(t, 30*time.Second, "both runs evicted", func() bool {
			return d.figure("apollo_tasks_evicted_total") >= float64(len(tenants))
		})
		taken := d.figure("apollo_checkpoints_total")
		eventually(t, 30*time.Second, "a checkpoint after the eviction", func() bool {
			return d.figure("apollo_checkpoints_total") > taken
		})
		d.crash()
		for i, tenant := range tenants {
			var tk struct{ TaskID, Status string }
			d.do(tenant, "GET", "/api/v1/tasks/"+ids[tenant], "", &tk, http.StatusOK)
			if tk.TaskID != ids[tenant] || tk.Status != "failed" {
				t.Errorf("tenant %s, run %s after kill -9: %+v, want it failed", tenant, ids[tenant], tk)
			}
			other := tenants[(i+1)%len(tenants)]
			d.do(other, "GET", "/api/v1/tasks/"+ids[tenant], "", nil, http.StatusNotFound)
		}
	})
}

// figure returns the value of an unlabelled figure on /metrics, read as
// the default tenant's admin, or -1 when it is not there.
func (d *deployment) figure(name string) float64 {
	d.t.Helper()
	req, err := http.NewRequest("GET", "http://"+d.api.addr+"/metrics", nil)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.tokens[""])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				d.t.Fatalf("/metrics: %s %q: %v", name, v, err)
			}
			return f
		}
	}
	return -1
}

// A data directory whose archive file ends in part of a line: a backup
// copied it while the server wrote (docs/operations.md copies archive/ of
// a running server), or a power cut. The server appended the next run's
// line to that part, the two read as one bad line, and that run, gone
// from memory and from the next snapshot, was not found again, whichever
// tenant it belonged to. Now the part stays on a line of its own, and the
// runs archived after it are found, per tenant, after kill -9.
func TestArchiveAfterACutLine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d := newDeployment(t, false, newHook(t), deployOptions{config: "retention:\n  finished: 1s\nsnapshot_every: 1s\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	archived := func(job string) map[string]string {
		t.Helper()
		ids := map[string]string{}
		evicted := d.figure("apollo_tasks_evicted_total")
		for _, tenant := range tenants {
			d.fail(tenant, tenant+job)
			ids[tenant] = fmt.Sprintf("%s%s-%d", tenant, job, d.seq.Load())
		}
		eventually(t, 30*time.Second, "both runs evicted", func() bool {
			return d.figure("apollo_tasks_evicted_total") >= evicted+float64(len(tenants))
		})
		taken := d.figure("apollo_checkpoints_total")
		eventually(t, 30*time.Second, "a checkpoint after the eviction", func() bool {
			return d.figure("apollo_checkpoints_total") > taken
		})
		return ids
	}
	before := archived("_before")
	d.api.term(t)
	files, _ := filepath.Glob(filepath.Join(d.dir, "data", "archive", "tasks-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("archive files %v, want one", files)
	}
	f, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"taskID":"cut-by-the-copy","name":"cut","ten`) // where the copy stopped
	f.Close()
	d.start()
	after := archived("_after")
	d.crash()
	for _, ids := range []map[string]string{before, after} {
		for _, tenant := range tenants {
			var tk struct{ TaskID, Status string }
			d.do(tenant, "GET", "/api/v1/tasks/"+ids[tenant], "", &tk, http.StatusOK)
			if tk.Status != "failed" {
				t.Errorf("tenant %s, run %s: %+v, want it failed", tenant, ids[tenant], tk)
			}
		}
	}
}
