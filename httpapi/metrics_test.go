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
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

func TestMetricsAPI(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	agg, _ := metrics.New(metrics.Options{Clock: clock})
	b, _ := bus.New(bus.Options{Clock: clock, Observers: []bus.Observer{agg}, Logger: discardLogger})
	b.Start(context.Background())
	defer b.Stop()
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
		Jobs   []jobRow
		Total  jobRow
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
		Points []jobRow
	}
	getJSON(t, srv.URL+"/api/v1/metrics/batch_load?window=2m&step=30s", &series)
	finished := int64(0)
	for _, p := range series.Points {
		finished += p.Count
	}
	if len(series.Points) != 4 || finished != 10 {
		t.Errorf("series %+v", series)
	}
	for _, bad := range []string{"/api/v1/metrics?window=7s", "/api/v1/metrics?window=soon", "/api/v1/metrics/x?step=-1s"} {
		if r, _ := http.Get(srv.URL + bad); r.StatusCode != 400 {
			t.Errorf("%s: %d", bad, r.StatusCode)
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
