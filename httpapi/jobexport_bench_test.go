package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

// benchJobs is an aggregator with jobs jobs of three runs each (two
// successes and a failure in the last ten minutes), the first of
// them still running a fourth.
func benchJobs(b *testing.B, jobs int) *metrics.Aggregator {
	b.Helper()
	agg, err := metrics.New(metrics.Options{Logger: discardLogger})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range jobs {
		name := fmt.Sprintf("job_%03d_%06d", i%997, i)
		for k, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusRunning} {
			id := fmt.Sprintf("%s-%d", name, k)
			start := now - int64(10-3*k)*60_000
			run := apollo.Task{TaskID: id, Name: name, Status: apollo.StatusRunning, StartedAt: start}
			agg.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: name, Status: apollo.StatusRunning, Ts: start}},
				Task: run})
			if st == apollo.StatusRunning {
				continue
			}
			end := run
			end.Status, end.FinishedAt, end.CostMs = st, start+int64(1000*(k+1)), int64(1000*(k+1))
			agg.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: name, Status: st, Ts: end.FinishedAt}},
				Prev: apollo.BeforeOf(&run), Task: end})
		}
	}
	return agg
}

// BenchmarkJobExposition is one scrape of GET /metrics/jobs for a tenant
// of 10 000 and 100 000 jobs: with a cap of 1 job (the verdicts of every
// job, counted, and almost nothing written), the default cap of 1 000
// and the largest, 10 000. The jobs' runs did not change since the last
// scrape, the usual case, so their facts are kept from it.
// docs/benchmarks.md records the figures.
func BenchmarkJobExposition(b *testing.B) {
	for _, jobs := range []int{10_000, 100_000} {
		agg := benchJobs(b, jobs)
		s := New(Options{Bus: &bus.Bus{}, Metrics: agg, Logger: discardLogger})
		for _, limit := range []int{1, defaultExportJobs, maxExportJobs} {
			b.Run(fmt.Sprintf("jobs=%d/limit=%d", jobs, limit), func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/metrics/jobs?limit=%d", limit), nil)
				req.Host = "127.0.0.1"
				var size int
				b.ReportAllocs()
				for b.Loop() {
					rec := httptest.NewRecorder()
					s.ServeHTTP(rec, req)
					size = rec.Body.Len()
				}
				b.ReportMetric(float64(size), "bytes/scrape")
			})
		}
	}
}
