package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/apollo-11/apollo"
)

// One method per route (docs/protocol.md). Each returns the server's
// error as an *Error, or an *UnreachableError when no answer came.

// Health asks GET /healthz whether the server is alive.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.get(ctx, "/healthz", nil, &h)
	return h, err
}

// Ready asks GET /readyz whether the server has finished recovery. A
// server that has not answers 503 with its state: Ready returns that state
// and an *Error of code EUNAVAILABLE.
func (c *Client) Ready(ctx context.Context) (Health, error) {
	r := request{method: http.MethodGet, path: "/readyz"}
	resp, raw, err := c.roundTrip(ctx, r)
	if err != nil {
		return Health{}, err
	}
	var h Health
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return h, decode(r, raw, &h)
	case resp.StatusCode == http.StatusServiceUnavailable && json.Unmarshal(raw, &h) == nil && h.Status != "":
		return h, &Error{Method: r.method, Path: r.path, Status: resp.StatusCode,
			Err: &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the server at " + c.base + " is not ready: " + h.Status}}
	}
	return Health{}, answerError(c.base, r.method, r.path, resp, raw)
}

// System is GET /api/v1/system: what every part of the server reports
// about itself, a JSON object whose shape is the parts' own.
func (c *Client) System(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.get(ctx, "/api/v1/system", nil, &raw)
	return raw, err
}

// Metrics is GET /api/v1/metrics: a row per job whose name starts with
// prefix ("" for all), over the last window (0: the server's default, 5m).
// The server answers a page of jobs at a time (10 000, in name order);
// Metrics reads on to the last page, so the answer holds every job, and
// its Total is the first page's.
func (c *Client) Metrics(ctx context.Context, window time.Duration, prefix string) (MetricsPage, error) {
	q := url.Values{}
	if window > 0 {
		q.Set("window", window.String())
	}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	var all MetricsPage
	for first := true; ; first = false {
		var p MetricsPage
		if err := c.get(ctx, "/api/v1/metrics", q, &p); err != nil {
			return MetricsPage{}, err
		}
		if first {
			all = p
		} else {
			all.Jobs = append(all.Jobs, p.Jobs...)
		}
		if p.Next == "" {
			break
		}
		if p.Next <= q.Get("after") { // a server that does not move on would be asked forever
			return MetricsPage{}, fmt.Errorf("GET %s/api/v1/metrics: the page after %q says the next begins after %q, not later", c.base, q.Get("after"), p.Next)
		}
		q.Set("after", p.Next)
	}
	all.Next = ""
	return all, nil
}

// seriesQuery is the window and step of a series; zero asks for the
// server's default (1h, 10s).
func seriesQuery(window, step time.Duration) url.Values {
	q := url.Values{}
	if window > 0 {
		q.Set("window", window.String())
	}
	if step > 0 {
		q.Set("step", step.String())
	}
	return q
}

// JobSeries is GET /api/v1/metrics/{name}: one job's metrics over the last
// window, a point per step.
func (c *Client) JobSeries(ctx context.Context, name string, window, step time.Duration) (JobSeries, error) {
	var s JobSeries
	err := c.get(ctx, "/api/v1/metrics/"+segment(name), seriesQuery(window, step), &s)
	return s, err
}

// PrefixSeries is GET /api/v1/series: the series of every job under
// prefix, added up.
func (c *Client) PrefixSeries(ctx context.Context, prefix string, window, step time.Duration) (PrefixSeries, error) {
	q := seriesQuery(window, step)
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	var s PrefixSeries
	err := c.get(ctx, "/api/v1/series", q, &s)
	return s, err
}

// TaskQuery selects tasks; zero fields select everything.
type TaskQuery struct {
	Prefix string        // of the job name or the task ID
	Status apollo.Status // StatusNone: any
	Since  int64         // updated at or after, Unix ms
	Until  int64         // updated before, Unix ms
	Cursor string        // TaskPage.Next of the page before
	Limit  int           // 0: the server's default; at most 1 000
}

// Tasks is GET /api/v1/tasks: one page of tasks, newest first (by
// createdAt, then task ID, both descending; docs/protocol.md, "Reading
// state"). Following Next to the end lists each task once, however the
// tasks change meanwhile.
func (c *Client) Tasks(ctx context.Context, tq TaskQuery) (TaskPage, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("prefix", tq.Prefix)
	if tq.Status != apollo.StatusNone {
		set("status", tq.Status.String())
	}
	for k, v := range map[string]int64{"since": tq.Since, "until": tq.Until, "limit": int64(tq.Limit)} {
		if v != 0 {
			set(k, strconv.FormatInt(v, 10))
		}
	}
	set("cursor", tq.Cursor)
	var p TaskPage
	err := c.get(ctx, "/api/v1/tasks", q, &p)
	return p, err
}

// Task is GET /api/v1/tasks/{id}: one task with its history.
func (c *Client) Task(ctx context.Context, id string) (apollo.Task, error) {
	var t apollo.Task
	err := c.get(ctx, "/api/v1/tasks/"+segment(id), nil, &t)
	return t, err
}

// CorrectTask is POST /api/v1/tasks/{id}/status: an operator sets a task's
// status by hand, with a reason (audited).
func (c *Client) CorrectTask(ctx context.Context, id string, corr Correction) (apollo.Task, error) {
	var t apollo.Task
	err := c.send(ctx, http.MethodPost, "/api/v1/tasks/"+segment(id)+"/status", corr, &t)
	return t, err
}

// Alerts is GET /api/v1/alerts: the alerts in state ("" for every state),
// firing first and newest first, at most 10 000 of them; Total says how
// many there are.
func (c *Client) Alerts(ctx context.Context, state apollo.AlertState) (AlertList, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", string(state))
	}
	var l AlertList
	err := c.get(ctx, "/api/v1/alerts", q, &l)
	return l, err
}

// Ack is POST /api/v1/alerts/{id}/ack: someone is on it; no more repeats.
func (c *Client) Ack(ctx context.Context, id string) (Alert, error) {
	var a AckAnswer
	err := c.send(ctx, http.MethodPost, "/api/v1/alerts/"+segment(id)+"/ack", nil, &a)
	return a.Alert, err
}

// Silences is GET /api/v1/silences.
func (c *Client) Silences(ctx context.Context) ([]apollo.Silence, error) {
	var l SilenceList
	err := c.get(ctx, "/api/v1/silences", nil, &l)
	return l.Silences, err
}

// AddSilence is POST /api/v1/silences; it returns the silence as the
// server keeps it.
func (c *Client) AddSilence(ctx context.Context, s SilenceRequest) (apollo.Silence, error) {
	var a SilenceAnswer
	err := c.send(ctx, http.MethodPost, "/api/v1/silences", s, &a)
	return a.Silence, err
}

// RemoveSilence is DELETE /api/v1/silences/{id}.
func (c *Client) RemoveSilence(ctx context.Context, id string) error {
	return c.send(ctx, http.MethodDelete, "/api/v1/silences/"+segment(id), nil, &Removed{})
}

// Rules is GET /api/v1/rules.
func (c *Client) Rules(ctx context.Context) (RuleSet, error) {
	var rs RuleSet
	err := c.get(ctx, "/api/v1/rules", nil, &rs)
	return rs, err
}

// Content types of a rules file for PutRules.
const (
	RulesText = "text/plain; charset=utf-8"
	RulesJSON = "application/json"
)

// PutRules is PUT /api/v1/rules: it replaces the rules with a whole file,
// in its text form (RulesText) or its JSON form (RulesJSON). A file with
// problems changes nothing and is an *Error whose Problems say where.
func (c *Client) PutRules(ctx context.Context, src []byte, contentType string) (RuleSet, error) {
	var rs RuleSet
	err := c.do(ctx, request{method: http.MethodPut, path: "/api/v1/rules", body: src, contentType: contentType}, &rs)
	return rs, err
}

// Jobs is GET /api/v1/jobs: the jobs of the scheduler running in the
// server.
func (c *Client) Jobs(ctx context.Context) ([]apollo.ScheduledJob, error) {
	var l JobList
	err := c.get(ctx, "/api/v1/jobs", nil, &l)
	return l.Jobs, err
}

// RunJob is POST /api/v1/jobs/{name}/run: a run now, outside the
// schedule; the answer names its task.
func (c *Client) RunJob(ctx context.Context, name string) (JobAction, error) {
	return c.jobAction(ctx, name, "run")
}

// PauseJob is POST /api/v1/jobs/{name}/pause.
func (c *Client) PauseJob(ctx context.Context, name string) (JobAction, error) {
	return c.jobAction(ctx, name, "pause")
}

// ResumeJob is POST /api/v1/jobs/{name}/resume.
func (c *Client) ResumeJob(ctx context.Context, name string) (JobAction, error) {
	return c.jobAction(ctx, name, "resume")
}

func (c *Client) jobAction(ctx context.Context, name, action string) (JobAction, error) {
	var a JobAction
	err := c.send(ctx, http.MethodPost, "/api/v1/jobs/"+segment(name)+"/"+action, nil, &a)
	return a, err
}

// HealthQuery selects the jobs of the health board: under Prefix, or the
// one job named Job. Limit and Runs 0 ask for the server's defaults.
type HealthQuery struct {
	Prefix, Job string
	Limit, Runs int
}

// JobsHealth is GET /api/v1/jobs/health: every job's verdict, worst first.
func (c *Client) JobsHealth(ctx context.Context, hq HealthQuery) (HealthBoard, error) {
	q := url.Values{}
	for k, v := range map[string]string{"prefix": hq.Prefix, "job": hq.Job} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]int{"limit": hq.Limit, "runs": hq.Runs} {
		if v != 0 {
			q.Set(k, strconv.Itoa(v))
		}
	}
	var b HealthBoard
	err := c.get(ctx, "/api/v1/jobs/health", q, &b)
	return b, err
}

// NotificationQuery selects delivery attempts; zero fields select all.
type NotificationQuery struct {
	Channel, Alert string
	Limit          int // 0: the server's default, 100
}

// Notifications is GET /api/v1/notifications: the delivery record.
func (c *Client) Notifications(ctx context.Context, nq NotificationQuery) ([]apollo.Attempt, error) {
	q := url.Values{}
	for k, v := range map[string]string{"channel": nq.Channel, "alert": nq.Alert} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if nq.Limit != 0 {
		q.Set("limit", strconv.Itoa(nq.Limit))
	}
	var l AttemptList
	err := c.get(ctx, "/api/v1/notifications", q, &l)
	return l.Attempts, err
}

// TestChannel is POST /api/v1/channels/{name}/test: a test message through
// one of the server's channels (one of the token's tenant, or shared with
// it), now, and how it went. Operator role; audited. A channel that failed
// is an answer, not an error: read the attempt's Outcome.
func (c *Client) TestChannel(ctx context.Context, name string) (apollo.Attempt, error) {
	var a ChannelTest
	err := c.send(ctx, http.MethodPost, "/api/v1/channels/"+segment(name)+"/test", nil, &a)
	return a.Attempt, err
}

// Expectations is GET /api/v1/expectations: the tenant's job expectations.
func (c *Client) Expectations(ctx context.Context) (Expectations, error) {
	var e Expectations
	err := c.get(ctx, "/api/v1/expectations", nil, &e)
	return e, err
}

// PutExpectations is PUT /api/v1/expectations: it replaces the tenant's
// expectations with a whole file. A file with problems changes nothing
// and is an *Error whose Problems say where.
func (c *Client) PutExpectations(ctx context.Context, src []byte) (Expectations, error) {
	var e Expectations
	err := c.do(ctx, request{method: http.MethodPut, path: "/api/v1/expectations", body: src, contentType: RulesText}, &e)
	return e, err
}

// Suggestions is GET /api/v1/expectations/suggestions: the learner's
// proposal for job, or for the first jobs by name that have one (as many
// as the server lists at most) when job is "".
func (c *Client) Suggestions(ctx context.Context, job string) ([]Suggestion, error) {
	l, err := c.SuggestionList(ctx, job)
	return l.Suggestions, err
}

// SuggestionList is Suggestions with whether more jobs have proposals
// than were listed.
func (c *Client) SuggestionList(ctx context.Context, job string) (SuggestionList, error) {
	var l SuggestionList
	q := url.Values{}
	if job != "" {
		q.Set("job", job)
	}
	err := c.get(ctx, "/api/v1/expectations/suggestions", q, &l)
	return l, err
}

// AcceptSuggestion is POST /api/v1/expectations/suggestions/{job}/accept:
// the learner's proposal for job becomes its expectation (replacing one
// it had), in one call.
func (c *Client) AcceptSuggestion(ctx context.Context, job string) (Expectations, error) {
	var e Expectations
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/expectations/suggestions/" + url.PathEscape(job) + "/accept"}, &e)
	return e, err
}
