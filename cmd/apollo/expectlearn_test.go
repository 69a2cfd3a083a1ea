package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// What the learner saw of a job survives a restart, clean or kill -9:
// two tenants run a job hourly, each at its own minute; the proposals
// are the same after the restarts as before, each tenant's its own, and
// one accepted after a kill -9 holds what was learned. Before, the
// learner lived only in memory and was fed by the log's replay: a
// snapshot (every 5 m, and at every clean stop) covered the runs, so
// after any restart `apollo expect suggest` had nothing to propose
// until ten more runs came.
func TestLearnedRunsSurviveARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the server")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := callCtx(t)

	minute := map[string]int{"": 7, "acme": 23}
	base := time.Now().Add(-14 * time.Hour).Truncate(time.Hour)
	for tenant, mm := range minute {
		var b strings.Builder
		b.WriteByte('[')
		for i := range 12 {
			at := base.Add(time.Duration(i)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(i%4)*time.Second).UnixMilli()
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"taskID":"nightly-%d","name":"nightly","status":"running","sequence":1,"ts":%d},`, i, at)
			fmt.Fprintf(&b, `{"taskID":"nightly-%d","name":"nightly","status":"success","sequence":2,"ts":%d,"costMs":%d}`, i, at+90_000, 90_000)
		}
		b.WriteByte(']')
		report(t, srv.addr, x.tokens[tenant], b.String())
	}
	suggested := func(srv *proc, tenant string) apiclient.Suggestion {
		t.Helper()
		list, err := x.client(t, srv, tenant).Suggestions(ctx(), "")
		if err != nil {
			t.Fatal(err)
		}
		var found []apiclient.Suggestion
		for _, s := range list {
			if s.Job == "nightly" {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("tenant %q: proposals %+v, want one for nightly", tenant, list)
		}
		return found[0]
	}
	before := map[string]apiclient.Suggestion{}
	for tenant, mm := range minute {
		s := suggested(srv, tenant)
		if want := fmt.Sprintf("%d * * * *", mm); s.Schedule != want || s.Runs != 12 || s.Durations != 12 || s.MaxRuntime == "" {
			t.Fatalf("tenant %q before the restart: %+v, want schedule %q from 12 runs", tenant, s, want)
		}
		before[tenant] = s
	}

	check := func(srv *proc, when string) {
		t.Helper()
		for tenant := range minute {
			if s := suggested(srv, tenant); fmt.Sprint(s) != fmt.Sprint(before[tenant]) {
				t.Fatalf("tenant %q %s: %+v, want %+v", tenant, when, s, before[tenant])
			}
		}
	}
	srv.term(t) // a clean stop takes a snapshot
	srv = x.start(t)
	check(srv, "after a clean restart")
	srv.kill()
	srv = x.start(t)
	check(srv, "after kill -9")

	if _, err := x.client(t, srv, "acme").AcceptSuggestion(ctx(), "nightly"); err != nil {
		t.Fatal(err)
	}
	srv.kill()
	srv = x.start(t)
	got, err := x.client(t, srv, "acme").Expectations(ctx())
	if err != nil || got.Count != 1 || !strings.Contains(got.Source, "schedule: 23 * * * *") {
		t.Fatalf("acme's accepted proposal after kill -9: %+v %v", got, err)
	}
	if def, err := x.client(t, srv, "").Expectations(ctx()); err != nil || strings.Contains(def.Source, "nightly") {
		t.Fatalf("the default tenant's expectations: %+v %v", def, err)
	}
}

// Every proposal the learner lists can be accepted, in each tenant: a job
// whose name holds a control character (events take any UTF-8 name; an
// expectation's job cannot hold one) is not proposed, and accepting it
// says why instead of blaming the name the runs report. Before, the list
// showed it with an empty YAML, and accepting it was refused with "use
// the name the job's runs report".
func TestEveryProposalCanBeAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := callCtx(t)
	base := time.Now().Add(-14 * time.Hour).Truncate(time.Hour)
	for _, tenant := range []string{"", "acme"} {
		var b strings.Builder
		b.WriteByte('[')
		for i := range 12 {
			at := base.Add(time.Duration(i)*time.Hour + 5*time.Minute).UnixMilli()
			for k, name := range []string{"tab\\tjob", "esc\\u001b[31m", "plain"} {
				if i > 0 || k > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"taskID":"%s-%d","name":"%s","status":"success","sequence":1,"ts":%d,"costMs":1000}`, strings.ReplaceAll(name, "\\", ""), i, name, at)
			}
		}
		b.WriteByte(']')
		report(t, srv.addr, x.tokens[tenant], b.String())
	}
	// The learner keeps the two plain jobs, one per tenant, and says so
	// (once it has heard of the runs: asking for proposals waits for that).
	if _, err := x.client(t, srv, "").Suggestions(ctx(), ""); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+srv.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+x.tokens[""])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\napollo_learner_jobs 2\n") || !strings.Contains(string(body), "\napollo_learner_runs_dropped_total 0\n") {
		t.Errorf("/metrics: the learner's figures are not 2 jobs, 0 dropped:\n%s", grepLines(string(body), "apollo_learner"))
	}
	for _, tenant := range []string{"", "acme"} {
		c := x.client(t, srv, tenant)
		list, err := c.Suggestions(ctx(), "")
		if err != nil {
			t.Fatal(err)
		}
		var jobs []string
		for _, s := range list {
			jobs = append(jobs, s.Job)
			if s.YAML == "" {
				t.Errorf("tenant %q: a proposal without YAML: %+v", tenant, s)
			}
		}
		if fmt.Sprint(jobs) != "[plain]" {
			t.Errorf("tenant %q: proposals for %q, want only plain", tenant, jobs)
		}
		if _, err := c.AcceptSuggestion(ctx(), "plain"); err != nil {
			t.Errorf("tenant %q: accepting plain: %v", tenant, err)
		}
		_, err = c.AcceptSuggestion(ctx(), "tab\tjob")
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Err.Field != "job" || !strings.Contains(ae.Err.Message, "control character") ||
			strings.Contains(ae.Err.Hint, "the name the job's runs report") {
			t.Errorf("tenant %q: accepting tab\\tjob: %#v", tenant, err)
		}
	}
}

// One GET of the proposals costs at most limit proposals (default and
// at most 1000), in each tenant, and says when there are more. Before,
// it worked out and sent a proposal for every job of the tenant: 200 000
// jobs (as many as the learner keeps) took one viewer's request 20 s of
// CPU and an answer of about 80 MB, the dashboard's Expectations page
// included.
func TestProposalsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	base := time.Now().Add(-14 * time.Hour).Truncate(time.Hour)
	jobs := map[string]int{"": 2, "acme": 7}
	for tenant, n := range jobs {
		var b strings.Builder
		b.WriteByte('[')
		for j := range n {
			for i := range 12 {
				if i > 0 || j > 0 {
					b.WriteByte(',')
				}
				at := base.Add(time.Duration(i)*time.Hour + time.Duration(j)*time.Minute).UnixMilli()
				fmt.Fprintf(&b, `{"taskID":"p%d-%d","name":"p%d","status":"success","sequence":1,"ts":%d,"costMs":1000}`, j, i, j, at)
			}
		}
		b.WriteByte(']')
		report(t, srv.addr, x.tokens[tenant], b.String())
	}
	get := func(tenant, query string, status int) apiclient.SuggestionList {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+srv.addr+"/api/v1/expectations/suggestions"+query, nil)
		req.Header.Set("Authorization", "Bearer "+x.tokens[tenant])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l apiclient.SuggestionList
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != status {
			t.Fatalf("%s %q: %d %v, want %d", tenant, query, resp.StatusCode, err, status)
		}
		return l
	}
	names := func(l apiclient.SuggestionList) string {
		var out []string
		for _, s := range l.Suggestions {
			out = append(out, s.Job)
		}
		return fmt.Sprint(out, l.More)
	}
	for _, tc := range []struct{ tenant, query, want string }{
		{"acme", "?limit=5", "[p0 p1 p2 p3 p4] true"},
		{"acme", "?limit=7", "[p0 p1 p2 p3 p4 p5 p6] false"},
		{"acme", "", "[p0 p1 p2 p3 p4 p5 p6] false"},
		{"", "?limit=5", "[p0 p1] false"},
		{"", "?limit=1", "[p0] true"},
		{"acme", "?job=p6&limit=1", "[p6] false"},
	} {
		if got := names(get(tc.tenant, tc.query, 200)); got != tc.want {
			t.Errorf("tenant %q %s: %s, want %s", tc.tenant, tc.query, got, tc.want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x"} {
		get("acme", q, 400)
	}
}
