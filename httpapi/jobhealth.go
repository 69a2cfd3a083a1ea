package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// GET /api/v1/jobs/health answers, for the caller's tenant, every job's
// verdict with its last run, usual duration and interval, next expected
// run where known, and its recent runs (docs/dashboard.md defines the
// verdicts). It reads the jobs' health records that the metrics keep
// (metrics.JobsHealth): the cost is O(jobs under the prefix) for the
// verdicts plus O(jobs shown × runs) for the answer, never O(tasks).

// JobHealthSource is what the job health routes read. The Aggregator
// (metrics.Store of the server and of the bus process) is one; a store
// without it (redisstore, on a scale-out node) leaves the routes
// answering "not available".
type JobHealthSource interface {
	JobsHealth(tenant, prefix string, fn func(*apollo.JobHealth) bool)
	RecentRuns(tenant, name string, dst []apollo.RecentRun) []apollo.RecentRun
}

// nextRunner is a Scheduler that knows when its jobs run next.
type nextRunner interface {
	// NextRuns returns when each job that is not paused runs next.
	NextRuns() map[string]time.Time
}

// Limits of the job health routes.
const (
	defaultHealthJobs = 200
	maxHealthJobs     = 1000
)

// viewRun is a run as the API shows it.
func viewRun(r *apollo.RecentRun) apiclient.Run {
	return apiclient.Run{TaskID: r.TaskID, Status: r.Status, Late: r.Late, ReportedAt: r.ReportedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, CostMs: r.CostMs}
}

// healthQuery is what a request asks of the job health.
type healthQuery struct {
	prefix, job string
	limit, runs int
}

func parseHealthQuery(r *http.Request) (healthQuery, error) {
	var hq healthQuery
	var err error
	if hq.prefix, err = boundedQuery(r, "prefix", apollo.MaxNameBytes); err != nil {
		return hq, err
	}
	if hq.job, err = boundedQuery(r, "job", apollo.MaxNameBytes); err != nil {
		return hq, err
	}
	if hq.limit, err = intParam(r, "limit", defaultHealthJobs, 1, maxHealthJobs); err != nil {
		return hq, err
	}
	if hq.runs, err = intParam(r, "runs", apollo.DefaultRecentRuns, 0, apollo.MaxRecentRuns); err != nil {
		return hq, err
	}
	if hq.job != "" && hq.prefix != "" {
		return hq, &apollo.Error{Code: apollo.EINVALID, Field: "job", Message: "give job or prefix, not both",
			Hint: "job names one job; prefix selects every job whose name starts with it"}
	}
	return hq, nil
}

// intParam reads an integer query parameter from lo to hi, with a
// default.
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &apollo.Error{Code: apollo.EINVALID, Field: name, Message: fmt.Sprintf("%s is not a number from %d to %d", quoteInput(v), lo, hi)}
	}
	return n, nil
}

// healthSource returns the jobs' health, once it includes what the bus
// accepted before r (settle).
func (s *Server) healthSource(r *http.Request) (JobHealthSource, error) {
	if h, ok := s.opts.Metrics.(JobHealthSource); ok {
		s.settle(r.Context())
		return h, nil
	}
	return nil, &apollo.Error{Code: apollo.ENOTFOUND, Message: "this process keeps no job health",
		Hint: "ask the all-in-one server or the bus process (apollo bus); scale-out nodes do not keep it"}
}

// nextRuns returns when the tenant's jobs run next, where known.
func (s *Server) nextRuns(tenant string) map[string]time.Time {
	if nr, ok := s.opts.Scheduler.(nextRunner); ok && tenant == s.opts.SchedulerTenant {
		return nr.NextRuns()
	}
	return nil
}

// board computes the verdicts of the jobs under the query's prefix and
// keeps the limit worst; within a verdict, jobs come in name order.
func (s *Server) board(src JobHealthSource, tenant string, q healthQuery) *apiclient.HealthBoard {
	now := s.now().UnixMilli()
	next := s.nextRuns(tenant)
	b := &apiclient.HealthBoard{Now: now, Verdicts: map[apollo.Verdict]int{}}
	// Jobs arrive in name order, so the first limit of each verdict are
	// the only candidates: memory stays O(limit) for any number of jobs.
	byRank := make([][]apiclient.JobHealth, len(apollo.Verdicts()))
	src.JobsHealth(tenant, cmp.Or(q.job, q.prefix), func(h *apollo.JobHealth) bool {
		if q.job != "" && h.Name != q.job {
			return false
		}
		f := h.Facts
		if t, ok := next[h.Name]; ok {
			f.NextRunAt = t.UnixMilli()
		}
		v := f.Verdict(now)
		b.Total++
		b.Verdicts[v]++
		rank := min(v.Rank(), len(byRank)-1)
		if len(byRank[rank]) >= q.limit {
			return true
		}
		jv := apiclient.JobHealth{Name: strings.Clone(h.Name), Verdict: v, UsualCostMs: f.UsualCostMs, UsualEveryMs: f.UsualEveryMs,
			LastRunAt: f.LastRunAt, Running: h.Running, RunningSince: f.RunningSince, NextRunAt: f.NextRunAt,
			LastSuccessAt: h.LastSuccessAt}
		if h.Last.TaskID != "" {
			last := viewRun(&h.Last)
			jv.LastRun = &last
		}
		byRank[rank] = append(byRank[rank], jv)
		return true
	})
	b.Jobs = []apiclient.JobHealth{} // none is [], not null
	for _, r := range byRank {
		b.Jobs = append(b.Jobs, r[:min(len(r), q.limit-len(b.Jobs))]...)
	}
	var runs []apollo.RecentRun
	for i := range b.Jobs {
		jv := &b.Jobs[i]
		runs = src.RecentRuns(tenant, jv.Name, runs[:0])
		runs = runs[max(len(runs)-q.runs, 0):]
		jv.Runs = make([]apiclient.Run, len(runs))
		for k := range runs {
			jv.Runs[k] = viewRun(&runs[k])
		}
	}
	return b
}

func (s *Server) jobsHealth(w http.ResponseWriter, r *http.Request, p *Principal) error {
	src, err := s.healthSource(r)
	if err != nil {
		return err
	}
	q, err := parseHealthQuery(r)
	if err != nil {
		return err
	}
	b := s.board(src, p.Tenant, q)
	if q.job != "" && b.Total == 0 {
		return &apollo.Error{Code: apollo.ENOTFOUND, Field: "job", Message: fmt.Sprintf("no job %s", quoteInput(q.job)),
			Hint: "a job is known from its first run until it has been idle for the metrics' rollup retention (24 h by default)"}
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}
