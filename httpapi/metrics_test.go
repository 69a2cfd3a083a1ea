package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

func TestMetricsAPI(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	agg, _ := metrics.New(metrics.Options{Clock: clock})
	b, _ := bus.New(bus.Options{Clock: clock, Observers: []bus.Observer{agg}, Logger: discardLogger})
	b.Start(context.Background())
	defer b.Stop(context.Background())
	srv := httptest.NewServer(New(Options{Bus: b, Metrics: agg, Clock: clock}))
	defer srv.Close()
	now := clock.Now().UnixMilli()
	var evs []string
	for i := range 10 {
		status := "success"
		if i < 3 {
			status = "failed"
		}
		evs = append(evs,
			fmt.Sprintf(`{"taskID":"b%d","name":"batch_load","sequence":1,"status":"running","ts":%d}`, i, now-60_000),
			fmt.Sprintf(`{"taskID":"b%d","sequence":2,"status":"%s","ts":%d}`, i, status, now-30_000))
	}
	evs = append(evs, fmt.Sprintf(`{"taskID":"e1","name":"etl","sequence":1,"status":"pending","ts":%d}`, now))
	resp, _ := http.Post(srv.URL+"/api/v1/events", "application/json", strings.NewReader("["+strings.Join(evs, ",")+"]"))
	resp.Body.Close()
	b.Checkpoint(func(uint64) error { return nil }) // every change reached the aggregator

	var list struct {
		Window string
		Jobs   []apiclient.JobRow
		Total  apiclient.JobRow
	}
	getJSON(t, srv.URL+"/api/v1/metrics?window=5m", &list)
	if list.Window != "5m0s" || len(list.Jobs) != 2 {
		t.Fatalf("list %+v", list)
	}
	bl := list.Jobs[0]
	if bl.Name != "batch_load" || bl.Count != 10 || bl.Failed != 3 || bl.FailedRate != 0.3 || bl.AvgCostMs != 30_000 || bl.Throughput != 2 {
		t.Errorf("batch_load %+v", bl)
	}
	if et := list.Jobs[1]; et.Name != "etl" || et.Backlog != 1 {
		t.Errorf("etl %+v", et)
	}
	getJSON(t, srv.URL+"/api/v1/metrics?window=5m&prefix=batch", &list)
	if len(list.Jobs) != 1 || list.Total.Count != 10 {
		t.Errorf("prefix: %+v", list)
	}
	var series struct {
		Step   string
		Points []apiclient.JobRow
	}
	getJSON(t, srv.URL+"/api/v1/metrics/batch_load?window=2m&step=30s", &series)
	finished := int64(0)
	for _, p := range series.Points {
		finished += p.Count
	}
	if len(series.Points) != 4 || finished != 10 {
		t.Errorf("series %+v", series)
	}
	for bad, msg := range map[string]string{
		"/api/v1/metrics?window=7s":   "",
		"/api/v1/metrics?window=soon": `"soon" is not a duration`,
		"/api/v1/metrics/x?step=-1s":  `"-1s" is not above zero`,
		"/api/v1/metrics?window=0s":   `"0s" is not above zero`,
	} {
		r, b := send(t, "GET", srv.URL+bad, "", "")
		var ans struct{ Error apollo.Error }
		json.Unmarshal(b, &ans)
		if r.StatusCode != 400 || !strings.Contains(ans.Error.Message, msg) {
			t.Errorf("%s: %d %s, want 400 and %s", bad, r.StatusCode, b, msg)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// GET /api/v1/series adds up the jobs under a prefix, step by step, in
// the caller's tenant only.
func TestPrefixSeries(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Minute)
	hs := newHealthServer(t, now, nil)
	for i := range 3 {
		hs.run(t, "a", "batch_x", fmt.Sprintf("x%d", i), apollo.StatusFailed, now.Add(-30*time.Minute), time.Second)
		hs.run(t, "a", "batch_y", fmt.Sprintf("y%d", i), apollo.StatusSuccess, now.Add(-5*time.Minute), time.Second)
		hs.run(t, "a", "etl", fmt.Sprintf("e%d", i), apollo.StatusTimeout, now.Add(-5*time.Minute), time.Second)
	}
	hs.run(t, "b", "batch_x", "bx", apollo.StatusSuccess, now.Add(-5*time.Minute), time.Second)
	if err := hs.bus.Checkpoint(func(uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	get := func(tenant, query string) (int, string, []apiclient.JobRow) {
		st, body := callAs(t, "GET", hs.srv.URL+"/api/v1/series"+query, hs.tokens["viewer/"+tenant], "")
		var ans struct {
			Prefix, Window, Step string
			Points               []apiclient.JobRow
		}
		json.Unmarshal([]byte(body), &ans)
		return st, ans.Window + " " + ans.Step + " " + ans.Prefix, ans.Points
	}
	total := func(pts []apiclient.JobRow) (n apiclient.JobRow) {
		for _, p := range pts {
			n.Count, n.Failed, n.Timeout, n.Success = n.Count+p.Count, n.Failed+p.Failed, n.Timeout+p.Timeout, n.Success+p.Success
		}
		return n
	}
	st, head, pts := get("a", "?prefix=batch_&window=6h&step=1m")
	if n := total(pts); st != 200 || head != "6h0m0s 1m0s batch_" || len(pts) != 360 || n.Count != 6 || n.Failed != 3 || n.Success != 3 {
		t.Errorf("tenant a, batch_: %d %q %d points, totals %+v", st, head, len(pts), n)
	}
	if _, _, pts := get("a", ""); len(pts) != 360 || total(pts).Count != 9 || total(pts).Timeout != 3 {
		t.Errorf("tenant a, every job, the last hour by 10 s: %d points, totals %+v", len(pts), total(pts))
	}
	if _, _, pts := get("b", "?window=1h&step=1m"); len(pts) != 60 || total(pts).Count != 1 || total(pts).Success != 1 {
		t.Errorf("tenant b: %+v", total(pts))
	}
	if st, _, _ := get("a", "?step=7s"); st != 400 {
		t.Errorf("a step of 7s: %d", st)
	}
	srv, _ := newTestServer(t, nil)
	if st, body := call(t, "GET", srv.URL+"/api/v1/series", "", nil); st != 404 {
		t.Errorf("a process without metrics: %d %s", st, body)
	}
}
