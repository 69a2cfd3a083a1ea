package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// A page of GET /api/v1/metrics costs the same whatever the number of
// the tenant's jobs: before, the answer summarized every job of the
// tenant into a row (13 MB at 100 000 jobs) and then cut the page from
// them. Tenant a has 100 000 jobs and b 1 000; a page of 100 of either
// allocates about the same, and each total counts its own tenant's jobs
// only. Not parallel: it reads the process's allocation counter.
func TestMetricsPageCostsTheSameAtAnyNumberOfJobs(t *testing.T) {
	b, agg := newMeteredBus(t)
	auth, tokens := tenantTokens(t, RoleViewer)
	now := time.Now()
	jobs := map[string]int{"a": 100_000, "b": 1_000}
	for tenant, n := range jobs {
		for i := range n {
			name := fmt.Sprintf("job_%06d", i)
			agg.Apply(&apollo.Change{
				Record: apollo.Record{Event: apollo.Event{TaskID: name + "-1", Name: name, Tenant: tenant, Status: apollo.StatusRunning, Ts: now.UnixMilli()}},
				Prev:   apollo.Before{Name: name, Status: apollo.StatusPending},
				Task:   apollo.Task{TaskID: name + "-1", Name: name, Tenant: tenant, Status: apollo.StatusRunning, StartedAt: now.UnixMilli()},
			})
		}
	}
	h := New(Options{Bus: b, Metrics: agg, Auth: auth, Logger: discardLogger})
	page := func(tenant string) apiclient.MetricsPage {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/metrics?limit=100&after=job_000500", nil)
		req.Header.Set("Authorization", "Bearer "+tokens["viewer/"+tenant])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var p apiclient.MetricsPage
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
			t.Fatalf("tenant %s: %d %s", tenant, rec.Code, rec.Body)
		}
		return p
	}
	perPage := func(tenant string) uint64 {
		p := page(tenant) // the name index, built once for every request after
		if len(p.Jobs) != 100 || p.Next != "job_000600" || p.Total.Running != int64(jobs[tenant]) {
			t.Fatalf("tenant %s: %d rows, next %q, %d running in the total; want 100, job_000600, %d", tenant, len(p.Jobs), p.Next, p.Total.Running, jobs[tenant])
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const pages = 20
		for range pages {
			page(tenant)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / pages
	}
	small, large := perPage("b"), perPage("a")
	if large > 2*small {
		t.Errorf("a page of 100 allocates %d bytes for tenant a's 100 000 jobs, %d for b's 1 000: it grows with the jobs", large, small)
	}
}
