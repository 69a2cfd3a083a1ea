package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

// scrapeJobs gets /metrics/jobs as tenant's viewer and parses it: the
// format must be valid for a real scraper.
func scrapeJobs(t *testing.T, hs *healthServer, tenant, query string) map[string]*dto.MetricFamily {
	t.Helper()
	if err := hs.bus.Checkpoint(func(uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	st, body := callAs(t, "GET", hs.srv.URL+"/metrics/jobs"+query, hs.tokens["viewer/"+tenant], "")
	if st != 200 {
		t.Fatalf("GET /metrics/jobs%s as %s: %d %s", query, tenant, st, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v\n%s", err, body)
	}
	return fams
}

// familyValue returns the value of the family's series with the labels given
// (name, value pairs), or -1 when there is none.
func familyValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// The exposition carries each tenant's jobs, with the verdict, the last
// runs, the counts and durations that the board shows; the cap on jobs
// counts the rest.
func TestJobExposition(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Minute)
	hs := newHealthServer(t, now, fixedSchedule{"nightly": now.Add(time.Hour)})
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for i := range 3 {
		hs.run(t, "a", "etl", fmt.Sprintf("etl-%d", i), apollo.StatusSuccess, ago(time.Duration(30-5*i)*time.Minute), time.Duration(1+i)*time.Second)
	}
	hs.run(t, "a", "etl", "etl-3", apollo.StatusFailed, ago(5*time.Minute), 45*time.Second)
	hs.run(t, "a", "hang", "hang-1", apollo.StatusTimeout, ago(20*time.Minute), 5*time.Minute)
	hs.run(t, "a", "hang", "hang-2", apollo.StatusRunning, ago(2*time.Minute), 0)
	hs.run(t, "a", `we"ird\name`, "w1", apollo.StatusSuccess, ago(time.Minute), 50*time.Millisecond)
	hs.run(t, "a", "nightly", "n1", apollo.StatusSuccess, ago(time.Hour), time.Minute)
	hs.run(t, "b", "etl", "b-etl", apollo.StatusSuccess, ago(time.Minute), time.Second)

	a := scrapeJobs(t, hs, "a", "")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"apollo_job_up", []string{"job", "etl"}, 0},
		{"apollo_job_up", []string{"job", "nightly"}, 1},
		{"apollo_job_verdict", []string{"job", "etl", "verdict", "failing"}, 1},
		{"apollo_job_verdict", []string{"job", "hang", "verdict", "timing_out"}, 1},
		{"apollo_job_running", []string{"job", "hang"}, 1},
		{"apollo_job_running", []string{"job", "etl"}, 0},
		{"apollo_job_runs_total", []string{"job", "etl", "status", "success"}, 3},
		{"apollo_job_runs_total", []string{"job", "etl", "status", "failed"}, 1},
		{"apollo_job_runs_total", []string{"job", "hang", "status", "timeout"}, 1},
		{"apollo_job_last_success_timestamp_seconds", []string{"job", "etl"}, float64(ago(20 * time.Minute).Add(3 * time.Second).Unix())},
		{"apollo_job_last_run_timestamp_seconds", []string{"job", "etl", "status", "failed"}, float64(ago(5 * time.Minute).Add(45 * time.Second).Unix())},
		{"apollo_job_last_run_timestamp_seconds", []string{"job", "hang", "status", "success"}, -1},
		{"apollo_job_last_success_timestamp_seconds", []string{"job", "hang"}, -1},
		{"apollo_job_next_run_timestamp_seconds", []string{"job", "nightly"}, float64(now.Add(time.Hour).Unix())},
		{"apollo_job_duration_seconds", []string{"job", "etl"}, 4},
		{"apollo_job_up", []string{"job", `we"ird\name`}, 1},
		{"apollo_jobs", []string{"verdict", "failing"}, 1},
		{"apollo_jobs", []string{"verdict", "ok"}, 2},
		{"apollo_jobs_dropped", nil, 0},
	} {
		if got := familyValue(a, c.name, c.labels...); got != c.want {
			t.Errorf("tenant a: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The histogram: 1 s at 1 s (a bound is inclusive), 2 s and 3 s
	// under 10 s, 45 s under 60 s.
	for _, m := range a["apollo_job_duration_seconds"].Metric {
		if m.Label[0].GetValue() != "etl" {
			continue
		}
		h := m.Histogram
		buckets := map[float64]uint64{}
		for _, b := range h.Bucket {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		if buckets[0.1] != 0 || buckets[1] != 1 || buckets[10] != 3 || buckets[30] != 3 || buckets[60] != 4 || h.GetSampleSum() != 51 {
			t.Errorf("etl's durations: %v, sum %v", buckets, h.GetSampleSum())
		}
	}

	b := scrapeJobs(t, hs, "b", "")
	if len(b["apollo_job_up"].Metric) != 1 || familyValue(b, "apollo_job_up", "job", "etl") != 1 || familyValue(b, "apollo_job_next_run_timestamp_seconds", "job", "nightly") != -1 {
		t.Errorf("tenant b sees %v", b["apollo_job_up"])
	}

	// The cap keeps the first jobs by name and counts the rest; the prefix
	// narrows everything.
	capped := scrapeJobs(t, hs, "a", "?limit=2")
	if len(capped["apollo_job_up"].Metric) != 2 || familyValue(capped, "apollo_job_up", "job", "etl") != 0 ||
		familyValue(capped, "apollo_job_up", "job", "nightly") != -1 || familyValue(capped, "apollo_jobs_dropped") != 2 || familyValue(capped, "apollo_jobs", "verdict", "ok") != 2 {
		t.Errorf("limit=2: %v, dropped %v", capped["apollo_job_up"], familyValue(capped, "apollo_jobs_dropped"))
	}
	if p := scrapeJobs(t, hs, "a", "?prefix=h"); len(p["apollo_job_up"].Metric) != 1 || familyValue(p, "apollo_jobs", "verdict", "failing") != 0 {
		t.Errorf("prefix=h: %v", p["apollo_job_up"])
	}
	if st, body := callAs(t, "GET", hs.srv.URL+"/metrics/jobs?limit=10001", hs.tokens["viewer/a"], ""); st != 400 || !strings.Contains(body, "limit") {
		t.Errorf("limit over the cap: %d %s", st, body)
	}
	if st, _ := callAs(t, "GET", hs.srv.URL+"/metrics/jobs", hs.tokens["agent/a"], ""); st != 403 {
		t.Errorf("an agent token: %d, want 403", st)
	}
}

// Any job name comes out as a label value a scraper reads back as the
// name (bytes that are not UTF-8 as U+FFFD).
func FuzzJobExpositionNames(f *testing.F) {
	for _, s := range []string{"etl", `a"b`, `back\slash`, "line\nfeed", "报表_日", "\xff\xfe", "{}=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		agg, _ := metrics.New(metrics.Options{Logger: discardLogger})
		now := time.Now().UnixMilli()
		agg.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "t", Name: name, Status: apollo.StatusSuccess, Ts: now}},
			Task: apollo.Task{TaskID: "t", Name: name, Status: apollo.StatusSuccess, FinishedAt: now, CostMs: 5}})
		s := New(Options{Bus: &bus.Bus{}, Metrics: agg, Logger: discardLogger})
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics/jobs", nil)
		req.Host = "127.0.0.1"
		s.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("name %q: %v\n%s", name, err, body)
		}
		want := strings.ToValidUTF8(name, "\uFFFD")
		if name == "" {
			want = "t" // a job without a name is named by its task
		}
		if got := fams["apollo_job_up"].Metric[0].Label[0].GetValue(); got != want {
			t.Fatalf("name %q came back as %q", name, got)
		}
	})
}

// The Grafana dashboard in deploy/ asks only for series the exposition
// has, and only for verdicts and statuses that exist.
func TestGrafanaDashboardMatchesExposition(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../deploy/grafana-jobs.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana-jobs.json: %v", err)
	}
	now := time.Now().Truncate(time.Minute)
	hs := newHealthServer(t, now, nil)
	hs.run(t, "a", "etl", "e1", apollo.StatusSuccess, now.Add(-time.Minute), time.Second)
	fams := scrapeJobs(t, hs, "a", "")
	names := regexp.MustCompile(`\bapollo_[a-z_]+`)
	values := regexp.MustCompile(`(verdict|status)(=~?|!=)"([^"]*)"`)
	known := map[string]bool{}
	for _, v := range apollo.Verdicts() {
		known[string(v)] = true
	}
	for _, s := range finals {
		known[s.String()] = true
	}
	exprs := 0
	check := func(where, expr string) {
		exprs++
		for _, n := range names.FindAllString(expr, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			if fams[base] == nil {
				t.Errorf("%s: %s is not in the exposition", where, n)
			}
		}
		for _, m := range values.FindAllStringSubmatch(expr, -1) {
			for _, v := range strings.Split(m[3], "|") {
				if !known[v] {
					t.Errorf("%s: %s %q is no verdict or status", where, m[1], v)
				}
			}
		}
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			check(p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			check("variable", v.Definition)
		}
	}
	if exprs < 10 {
		t.Errorf("only %d queries in the dashboard", exprs)
	}
}

// docs/monitoring.md names every family of the job exposition.
func TestJobExpositionDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Minute)
	hs := newHealthServer(t, now, fixedSchedule{"etl": now.Add(time.Hour)})
	hs.run(t, "a", "etl", "e1", apollo.StatusSuccess, now.Add(-time.Minute), time.Second)
	for name := range scrapeJobs(t, hs, "a", "") {
		if !strings.Contains(string(doc), "`"+name) {
			t.Errorf("docs/monitoring.md does not describe %s", name)
		}
	}
}
