package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/stream"
)

// MetricsStore is what the API reads metrics from (metrics.Aggregator,
// redisstore.Store).
type MetricsStore interface {
	// Summaries calls fn, in name order, for each job of tenant whose name
	// starts with prefix, with its Summary over the window that ends at
	// now, and returns their total.
	Summaries(ctx context.Context, tenant, prefix string, window time.Duration, now time.Time, fn func(name string, s *apollo.Summary)) (apollo.Summary, error)
	Series(ctx context.Context, tenant, name string, window, step time.Duration, now time.Time) ([]apollo.Point, error)
}

// rowOf is a job's summary as the API and the dashboards show it.
func rowOf(name string, s apollo.Summary) apiclient.JobRow {
	return apiclient.JobRow{
		Name: name, Count: s.Count, Success: s.Success, Failed: s.Failed, Timeout: s.Timeout,
		Started: s.Started, Late: s.Late, Missed: s.Missed, Due: s.Due(),
		FailedRate: s.FailedRate(), TimeoutRate: s.TimeoutRate(), LateRate: s.LateRate(),
		AvgCostMs: s.AvgCost(), MinCostMs: s.CostMin, MaxCostMs: s.CostMax,
		Backlog: s.Backlog, Running: s.Running, Throughput: s.Throughput(),
	}
}

// duration reads a query parameter like "5m", with a default.
func duration(r *http.Request, name string, def time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, &apollo.Error{Code: apollo.EINVALID, Field: name, Message: quoteInput(v) + " is not a duration", Hint: "e.g. 10s, 5m, 1h"}
	}
	if d <= 0 {
		return 0, &apollo.Error{Code: apollo.EINVALID, Field: name, Message: quoteInput(v) + " is not above zero", Hint: "e.g. 10s, 5m, 1h"}
	}
	return d, nil
}

// metricsStore returns the metrics, once they include what the bus
// accepted before r (settle).
func (s *Server) metricsStore(r *http.Request) (MetricsStore, error) {
	if s.opts.Metrics == nil {
		return nil, &apollo.Error{Code: apollo.ENOTFOUND, Message: "this process keeps no metrics", Hint: "ask the bus or the all-in-one server"}
	}
	s.settle(r.Context())
	return s.opts.Metrics, nil
}

// settler is a bus whose observers (the metrics, the jobs' health, the
// learner) can be waited for: bus.Bus, in the all-in-one server and the
// bus process. The processes that read these from Redis or another node
// have nothing to wait for here.
type settler interface {
	Settle(ctx context.Context) error
}

// settleFor bounds how long a read waits for the bus's observers to hear
// of what it accepted before the read; past it (observers far behind, an
// overloaded server) the read answers with what they have.
const settleFor = 2 * time.Second

// settle waits, at most settleFor, until the bus's observers have heard
// of every change it decided before the call: a read right after a
// report includes the report.
func (s *Server) settle(ctx context.Context) {
	b, ok := s.opts.Bus.(settler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, settleFor)
	defer cancel()
	b.Settle(ctx) // a timeout answers with what the observers have
}

// listMetrics answers a summary row per job over a window.
func (s *Server) listMetrics(w http.ResponseWriter, r *http.Request, p *Principal) error {
	store, err := s.metricsStore(r)
	if err != nil {
		return err
	}
	window, err := duration(r, "window", defaultMetricsWindow)
	if err != nil {
		return err
	}
	prefix, err := boundedQuery(r, "prefix", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	after, err := boundedQuery(r, "after", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", maxMetricRows, 1, maxMetricRows)
	if err != nil {
		return err
	}
	page, err := metricsPage(r.Context(), store, p.Tenant, prefix, after, limit, window, s.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// metricsPage is the body of GET /api/v1/metrics: a row for each of the
// first limit jobs of the tenant under prefix whose names sort after
// after, over window; Next when more follow; and the total of every job
// under prefix.
func metricsPage(ctx context.Context, store MetricsStore, tenant, prefix, after string, limit int, window time.Duration, now time.Time) (apiclient.MetricsPage, error) {
	rows := []apiclient.JobRow{}
	more := false
	total, err := store.Summaries(ctx, tenant, prefix, window, now, func(name string, s *apollo.Summary) {
		switch {
		case name <= after: // names come in order
		case len(rows) < limit:
			rows = append(rows, rowOf(name, *s))
		default:
			more = true
		}
	})
	if err != nil {
		return apiclient.MetricsPage{}, err
	}
	page := apiclient.MetricsPage{Window: window.String(), Prefix: prefix, Total: rowOf("", total), Jobs: rows}
	if more {
		page.Next = rows[len(rows)-1].Name
	}
	return page, nil
}

// maxMetricRows bounds the rows of one answer of GET /api/v1/metrics and
// of one metric message of the stream: a tenant may have a million jobs,
// and an answer with a row for each was 230 MB, built in memory, for any
// viewer who asked (11 MB at 50 000 jobs, every 10 s to each stream).
const maxMetricRows = 10_000

// defaultMetricsWindow is the window of GET /api/v1/metrics without one,
// and of the stream's metric messages.
const defaultMetricsWindow = 5 * time.Minute

// StreamMetrics is the source of the stream's metric messages
// (stream.Options.Metrics): for a tenant and prefix, what GET
// /api/v1/metrics answers without a window. One answer may take timeout
// at most (a store in Redis is a network call away).
func StreamMetrics(store MetricsStore, clock apollo.Clock, timeout time.Duration) stream.MetricsSource {
	return streamMetrics{store, clock, timeout}
}

type streamMetrics struct {
	store   MetricsStore
	clock   apollo.Clock
	timeout time.Duration
}

func (m streamMetrics) StreamSummaries(tenant, prefix string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	return metricsPage(ctx, m.store, tenant, prefix, "", maxMetricRows, defaultMetricsWindow, m.clock.Now())
}

// seriesSummer is a store that sums a prefix's series (metrics.Aggregator).
type seriesSummer interface {
	SeriesSum(ctx context.Context, tenant, prefix string, window, step time.Duration, now time.Time) ([]apollo.Point, error)
}

// seriesParams reads a series' window (default 1h) and step (default
// 10s).
func seriesParams(r *http.Request) (window, step time.Duration, err error) {
	if window, err = duration(r, "window", time.Hour); err != nil {
		return 0, 0, err
	}
	step, err = duration(r, "step", 10*time.Second)
	return window, step, err
}

// seriesOf is a series as the API shows it.
func seriesOf(pts []apollo.Point, window, step time.Duration) apiclient.Series {
	out := make([]apiclient.JobRow, len(pts))
	for i, pt := range pts {
		out[i] = rowOf("", pt.Summary)
		out[i].T = pt.T
	}
	return apiclient.Series{Window: window.String(), Step: step.String(), Points: out}
}

// jobMetrics answers one job's series, for charts.
func (s *Server) jobMetrics(w http.ResponseWriter, r *http.Request, p *Principal) error {
	store, err := s.metricsStore(r)
	if err != nil {
		return err
	}
	window, step, err := seriesParams(r)
	if err != nil {
		return err
	}
	name, err := boundedPath(r, "name", "name", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return &apollo.Error{Code: apollo.EINVALID, Field: "name", Message: "missing job name"}
	}
	pts, err := store.Series(r.Context(), p.Tenant, name, window, step, s.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.JobSeries{Name: name, Series: seriesOf(pts, window, step)})
	return nil
}

// prefixSeries answers the series of every job under a prefix added up:
// the charts of the overview.
func (s *Server) prefixSeries(w http.ResponseWriter, r *http.Request, p *Principal) error {
	store, err := s.metricsStore(r)
	if err != nil {
		return err
	}
	sum, ok := store.(seriesSummer)
	if !ok {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "this process does not add up series",
			Hint: "ask the all-in-one server or the bus process (apollo bus), or one job's series at /api/v1/metrics/{name}"}
	}
	window, step, err := seriesParams(r)
	if err != nil {
		return err
	}
	prefix, err := boundedQuery(r, "prefix", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	pts, err := sum.SeriesSum(r.Context(), p.Tenant, prefix, window, step, s.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.PrefixSeries{Prefix: prefix, Series: seriesOf(pts, window, step)})
	return nil
}
