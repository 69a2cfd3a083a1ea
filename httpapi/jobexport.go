package httpapi

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// GET /metrics/jobs is the caller's tenant's job health in the Prometheus
// text format (docs/monitoring.md), for teams that chart and alert in
// Grafana: per job its verdict, last success, last run by status, runs by
// status, a duration histogram and the runs in progress. It is written
// here, by hand, rather than through client_golang: a scrape of 10 000
// jobs is 200 000 lines, and building a metric object per line costs
// several times more than appending the text (BenchmarkJobExposition).
//
// Cardinality is bounded: at most limit jobs (the first by name under
// the prefix) get per-job series; the rest are counted in
// apollo_jobs_dropped, and every job of the prefix in apollo_jobs by
// verdict. A scrape config per prefix splits a larger fleet.

// Limits of the job exposition's per-job series.
const (
	defaultExportJobs = 1000
	maxExportJobs     = 10_000
)

// exportedJob is one job's numbers for the exposition.
type exportedJob struct {
	apollo.JobHealth
	verdict apollo.Verdict
	next    int64 // next expected run, Unix ms; 0 unknown
}

func (s *Server) jobExposition(w http.ResponseWriter, r *http.Request, p *Principal) error {
	src, err := s.healthSource(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", defaultExportJobs, 1, maxExportJobs)
	if err != nil {
		return err
	}
	prefix, err := boundedQuery(r, "prefix", apollo.MaxNameBytes)
	if err != nil {
		return err
	}
	now := s.now().UnixMilli()
	next := s.nextRuns(p.Tenant)
	jobs := make([]exportedJob, 0, min(limit, 4096))
	counts := make([]int, len(apollo.Verdicts()))
	dropped := 0
	src.JobsHealth(p.Tenant, prefix, func(h *apollo.JobHealth) bool {
		f := h.Facts
		if t, ok := next[h.Name]; ok {
			f.NextRunAt = t.UnixMilli()
		}
		v := f.Verdict(now)
		counts[min(v.Rank(), len(counts)-1)]++
		if len(jobs) >= limit {
			dropped++
			return true
		}
		j := exportedJob{JobHealth: *h, verdict: v, next: f.NextRunAt}
		j.Name = strings.Clone(h.Name)
		jobs = append(jobs, j)
		return true
	})
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	e := &exposition{w: bufio.NewWriterSize(w, 64<<10), labels: make([][]byte, len(jobs))}
	for i := range jobs {
		e.labels[i] = appendLabelValue(nil, jobs[i].Name)
	}
	e.write(jobs, counts, dropped)
	return e.w.Flush()
}

// exposition writes the text format. Every family's lines come together,
// as the format requires, so it makes one pass over the jobs per family.
type exposition struct {
	w      *bufio.Writer
	b      []byte
	labels [][]byte // each job's name, escaped for a label value
}

// The final statuses, in the order of the status label's values.
var finals = [...]apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout}

func (e *exposition) write(jobs []exportedJob, counts []int, dropped int) {
	e.family("apollo_jobs", "gauge", "Jobs under the prefix by verdict (every job, also those beyond the limit).")
	for i, v := range apollo.Verdicts() {
		e.sample("apollo_jobs", "", nil, "verdict", string(v), float64(counts[i]))
	}
	e.family("apollo_jobs_dropped", "gauge", "Jobs under the prefix without per-job series: beyond the limit (the first jobs by name are kept).")
	e.sample("apollo_jobs_dropped", "", nil, "", "", float64(dropped))

	e.family("apollo_job_up", "gauge", "1 when the job's verdict is ok, 0 otherwise (docs/dashboard.md defines the verdicts).")
	for i := range jobs {
		e.sample("apollo_job_up", "", e.labels[i], "", "", b2f(jobs[i].verdict == apollo.VerdictOK))
	}
	e.family("apollo_job_verdict", "gauge", "The job's verdict, as the label of a series of value 1.")
	for i := range jobs {
		e.sample("apollo_job_verdict", "", e.labels[i], "verdict", string(jobs[i].verdict), 1)
	}
	e.family("apollo_job_running", "gauge", "Runs of the job in progress.")
	for i := range jobs {
		e.sample("apollo_job_running", "", e.labels[i], "", "", float64(jobs[i].Running))
	}
	e.family("apollo_job_last_success_timestamp_seconds", "gauge", "When a run of the job last succeeded (absent: never, as far as the metrics remember).")
	for i := range jobs {
		if at := jobs[i].LastSuccessAt; at > 0 {
			e.sample("apollo_job_last_success_timestamp_seconds", "", e.labels[i], "", "", seconds(at))
		}
	}
	e.family("apollo_job_last_run_timestamp_seconds", "gauge", "When a run of the job last finished with each final status.")
	for i := range jobs {
		for k, at := range [...]int64{jobs[i].LastSuccessAt, jobs[i].LastFailedAt, jobs[i].LastTimeoutAt} {
			if at > 0 {
				e.sample("apollo_job_last_run_timestamp_seconds", "", e.labels[i], "status", finals[k].String(), seconds(at))
			}
		}
	}
	e.family("apollo_job_next_run_timestamp_seconds", "gauge", "When the job's next run is expected, where known (the scheduler).")
	for i := range jobs {
		if jobs[i].next > 0 {
			e.sample("apollo_job_next_run_timestamp_seconds", "", e.labels[i], "", "", seconds(jobs[i].next))
		}
	}
	e.family("apollo_job_runs_total", "counter", "Finished runs of the job by final status, since the job was first seen.")
	for i := range jobs {
		for k, n := range [...]int64{jobs[i].Success, jobs[i].Failed, jobs[i].Timeout} {
			e.sample("apollo_job_runs_total", "", e.labels[i], "status", finals[k].String(), float64(n))
		}
	}
	e.family("apollo_job_duration_seconds", "histogram", "Durations of the job's finished runs that reported or implied one.")
	for i := range jobs {
		j := &jobs[i]
		var cum int64
		for k, n := range j.Durations {
			cum += n
			le := "+Inf"
			if k < len(apollo.DurationBuckets) {
				le = strconv.FormatFloat(seconds(apollo.DurationBuckets[k]), 'f', -1, 64)
			}
			e.sample("apollo_job_duration_seconds", "_bucket", e.labels[i], "le", le, float64(cum))
		}
		e.sample("apollo_job_duration_seconds", "_sum", e.labels[i], "", "", seconds(j.CostSum))
		e.sample("apollo_job_duration_seconds", "_count", e.labels[i], "", "", float64(j.CostN))
	}
}

func (e *exposition) family(name, typ, help string) {
	e.b = append(e.b[:0], "# HELP "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, help...)
	e.b = append(e.b, "\n# TYPE "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, typ...)
	e.b = append(e.b, '\n')
	e.w.Write(e.b)
}

// sample writes one line: name+suffix, the job label when job is not nil
// (an escaped value), one more label when key is not empty (a value that
// needs no escaping), and the value.
func (e *exposition) sample(name, suffix string, job []byte, key, val string, v float64) {
	b := append(e.b[:0], name...)
	b = append(b, suffix...)
	if job != nil || key != "" {
		b = append(b, '{')
		if job != nil {
			b = append(b, `job="`...)
			b = append(b, job...)
			b = append(b, '"')
			if key != "" {
				b = append(b, ',')
			}
		}
		if key != "" {
			b = append(b, key...)
			b = append(b, `="`...)
			b = append(b, val...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	if i := int64(v); float64(i) == v { // most values are counts: the short path
		b = strconv.AppendInt(b, i, 10)
	} else {
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	b = append(b, '\n')
	e.b = b
	e.w.Write(b)
}

// appendLabelValue escapes s for a label value: backslash, double quote
// and line feed are escaped; bytes that are not UTF-8 become U+FFFD, as
// the format is UTF-8.
func appendLabelValue(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func seconds(ms int64) float64 { return float64(ms) / 1000 }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
