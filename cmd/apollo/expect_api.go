package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/httpapi"
)

// The API's side of the expectations: GET and PUT of each tenant's file,
// and the learner's proposals (docs/protocol.md).

var _ httpapi.Expectations = (*expectations)(nil)

// Expectations implements httpapi.Expectations.
// The count is the one worked out when the file was put in force: parsed
// again for each GET, a file of 4 MiB cost every reader seconds of a core
// and some 150 MB.
func (x *expectations) Expectations(tenant string) apiclient.Expectations {
	x.mu.Lock()
	defer x.mu.Unlock()
	return apiclient.Expectations{Source: string(x.srcs[tenant]), Count: x.own[tenant]}
}

// PutExpectations implements httpapi.Expectations: with ifMatch, only
// over the version of the tenant's file the client read, checked and
// written with no other put between.
func (x *expectations) PutExpectations(ctx context.Context, tenant string, src []byte, ifMatch string) ([]apiclient.RuleProblem, error) {
	defer x.puts.Lock(tenant)()
	if ifMatch != "" && ifMatch != "*" {
		x.mu.Lock()
		cur := string(x.srcs[tenant])
		x.mu.Unlock()
		if apiclient.FileTag(cur) != ifMatch {
			return nil, apiclient.Changed("expectations")
		}
	}
	err := x.putHeld(ctx, tenant, src)
	var fe *expect.FileError
	if !errors.As(err, &fe) {
		return nil, err
	}
	problems := make([]apiclient.RuleProblem, len(fe.Issues))
	for i, is := range fe.Issues {
		msg := is.Message
		if is.Field != "" {
			msg = is.Field + ": " + msg
		}
		if is.Job != "" {
			msg = fmt.Sprintf("job %q: %s", is.Job, msg)
		}
		problems[i] = apiclient.RuleProblem{Pos: fmt.Sprintf("%d:%d", is.Line, is.Col), Line: is.Line, Col: is.Col, Message: msg, Hint: is.Hint}
	}
	return problems, nil
}

// Suggestions implements httpapi.Expectations. Start times are read in
// the job's zone (zone).
func (x *expectations) Suggestions(tenant, job string, limit int) apiclient.SuggestionList {
	jobs := []string{job}
	if job == "" {
		jobs = x.learn.Jobs(tenant)
		slices.Sort(jobs)
	}
	var out apiclient.SuggestionList
	zone := x.zones(tenant)
	for _, j := range jobs {
		p, ok := x.learn.Suggest(tenant, j, zone(j))
		switch {
		case !ok:
		case len(out.Suggestions) == limit:
			out.More = true
			return out
		default:
			out.Suggestions = append(out.Suggestions, suggestion(p))
		}
	}
	return out
}

// zones says where the learner reads a job's start times: the zone of
// the job's own schedule; else the zone most of the tenant's schedules
// are read in (a file's defaults.timezone lands there), worked out once
// for every job asked; else UTC. Never the server's own zone, which says
// where it runs, not where its users' jobs do, and would move the
// proposal with each deployment.
func (x *expectations) zones(tenant string) func(job string) *time.Location {
	x.mu.Lock()
	set := x.sets[tenant]
	x.mu.Unlock()
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name) // "" is UTC; a set's zones were checked
		if err != nil {
			return time.UTC
		}
		return loc
	}
	var usual *time.Location
	return func(job string) *time.Location {
		if set == nil {
			return time.UTC
		}
		// A schedule without a timezone is read in UTC (defaults are
		// filled in): that is its zone, not the absence of one.
		if e, ok := set.Lookup(job); ok && e.Schedule != "" {
			return load(e.Timezone)
		}
		if usual == nil {
			count, name := map[string]int{}, ""
			for _, e := range set.Expectations() {
				if e.Schedule != "" {
					count[e.Timezone]++
				}
			}
			for tz, n := range count {
				if n > count[name] || n == count[name] && tz < name {
					name = tz
				}
			}
			usual = load(name)
		}
		return usual
	}
}

func suggestion(p expect.Proposal) apiclient.Suggestion {
	e := p.Expectation
	d := func(v time.Duration) string {
		if v == 0 {
			return ""
		}
		return v.String()
	}
	set, err := expect.NewSet([]expect.Expectation{e})
	yaml := ""
	if err == nil {
		yaml = strings.TrimPrefix(string(set.Marshal()), "expectations:\n")
	}
	return apiclient.Suggestion{Job: e.Job, Describe: p.Describe, Confidence: p.Confidence, Runs: p.Runs, Durations: p.Durations,
		Schedule: e.Schedule, Timezone: e.Timezone, Every: d(e.Every), Grace: d(e.Grace), MaxRuntime: d(e.MaxRuntime), MinRuntime: d(e.MinRuntime),
		YAML: yaml}
}

// AcceptSuggestion implements httpapi.Expectations: the proposal's
// schedule, grace and runtime bounds replace the job's (its upstream,
// max_runs and flapping stay), and the tenant's file is written out anew
// (its comments are not kept).
func (x *expectations) AcceptSuggestion(ctx context.Context, tenant, job string) (bool, error) {
	if err := expect.CheckJob(job); err != nil {
		return true, err // not "no proposal yet": there never will be one
	}
	p, ok := x.learn.Suggest(tenant, job, x.zones(tenant)(job))
	if !ok {
		return false, nil
	}
	defer x.puts.Lock(tenant)() // from the read to the write back: no PUT between, lost
	x.mu.Lock()
	src := slices.Clone(x.srcs[tenant])
	x.mu.Unlock()
	cur, err := expect.Parse("expectations", src)
	if err != nil {
		return true, err
	}
	exps := cur.Expectations()
	i := slices.IndexFunc(exps, func(e expect.Expectation) bool { return e.Job == job })
	if i < 0 {
		exps = append(exps, expect.Expectation{Job: job})
		i = len(exps) - 1
	}
	e, l := &exps[i], p.Expectation
	if l.Schedule != "" || l.Every != 0 {
		e.Schedule, e.Timezone, e.Every, e.Grace = l.Schedule, l.Timezone, l.Every, l.Grace
	}
	e.MaxRuntime, e.MinRuntime = cmp.Or(l.MaxRuntime, e.MaxRuntime), cmp.Or(l.MinRuntime, e.MinRuntime)
	if e.MinRuntime >= e.MaxRuntime && e.MaxRuntime > 0 {
		e.MinRuntime = 0
	}
	set, err := expect.NewSet(exps)
	if err != nil {
		return true, err
	}
	return true, x.putHeld(ctx, tenant, set.Marshal())
}
