package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// reportJobs reports, as tenant's agent, one failed run of each of n jobs
// named prefix<i>, in batches the server takes.
func reportJobs(t *testing.T, sec *secured, tenant, prefix string, n int) {
	t.Helper()
	now := time.Now().UnixMilli()
	for lo := 0; lo < n; lo += 5000 {
		evs := make([]string, 0, 5000)
		for i := lo; i < min(lo+5000, n); i++ {
			evs = append(evs, fmt.Sprintf(`{"taskID":"%s%06d","name":"%s%06d","sequence":1,"status":"failed","ts":%d}`, prefix, i, prefix, i, now))
		}
		status, body := sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/"+tenant], "["+strings.Join(evs, ",")+"]")
		if status != 200 || !strings.Contains(body, fmt.Sprintf(`"accepted":%d`, min(lo+5000, n)-lo)) {
			t.Fatalf("reporting %s's jobs: %d %.300s", tenant, status, body)
		}
	}
}

// GET /api/v1/metrics answers at most maxMetricRows rows, and the name
// to go on after; the total is still over every job. Before, it answered
// a row for every job of the tenant under the prefix in one answer,
// built in memory: 11 MB for 50 000 jobs, 230 MB for a million (and so
// did each live stream's metric message, every 10 s). Tenant a has one
// job more than a page; tenant b a few, and pages of 2.
func TestMetricsAnswerAPageOfJobs(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 0)
	reportJobs(t, sec, "a", "a_", maxMetricRows+1)
	reportJobs(t, sec, "b", "b_", 5)
	get := func(tenant, query string) apiclient.MetricsPage {
		t.Helper()
		status, body := sec.do(t, "GET", "/api/v1/metrics?window=1h"+query, sec.tokens["viewer/"+tenant], "")
		if status != 200 {
			t.Fatalf("tenant %s, %s: %d %.300s", tenant, query, status, body)
		}
		var p apiclient.MetricsPage
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := get("a", "")
	if len(first.Jobs) != maxMetricRows || first.Next != first.Jobs[len(first.Jobs)-1].Name || first.Total.Count != maxMetricRows+1 {
		t.Fatalf("tenant a's first page: %d rows, next %q, total count %d; want %d rows, the last one's name, %d",
			len(first.Jobs), first.Next, first.Total.Count, maxMetricRows, maxMetricRows+1)
	}
	rest := get("a", "&after="+url.QueryEscape(first.Next))
	if len(rest.Jobs) != 1 || rest.Jobs[0].Name != fmt.Sprintf("a_%06d", maxMetricRows) || rest.Next != "" || rest.Total.Count != maxMetricRows+1 {
		t.Errorf("tenant a's second page: %+v, want its last job alone, no next, the same total", rest)
	}
	var names []string
	for after := ""; ; {
		p := get("b", "&limit=2&after="+url.QueryEscape(after))
		for _, j := range p.Jobs {
			names = append(names, j.Name)
		}
		if p.Total.Count != 5 {
			t.Errorf("tenant b's page after %q: total count %d, want 5", after, p.Total.Count)
		}
		if after = p.Next; after == "" {
			break
		}
		if len(names) > 5 {
			t.Fatalf("tenant b's pages do not end: %v", names)
		}
	}
	if strings.Join(names, " ") != "b_000000 b_000001 b_000002 b_000003 b_000004" {
		t.Errorf("tenant b's pages of 2 list %v, want its 5 jobs once each in order", names)
	}
}
