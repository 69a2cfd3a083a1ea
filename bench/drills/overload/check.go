package main

import (
	"strings"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bench/internal/harness"
)

// newest returns up to n of the latest runs whose job starts with prefix.
func newest(runs []run, prefix string, n int) []run {
	var out []run
	for i := len(runs) - 1; i >= 0 && len(out) < n; i-- {
		if strings.HasPrefix(runs[i].Job, prefix) {
			out = append(out, runs[i])
		}
	}
	return out
}

// recount compares GET /api/v1/metrics with a recount of every acknowledged
// run and returns the events it is short of.
func recount(base string, runs []run) (lost int64, err error) {
	type counts struct{ Count, Failed, Started, Running int64 }
	want := map[string]counts{}
	for _, rn := range runs {
		c := want[rn.Job]
		c.Count++
		c.Started++
		if rn.Final == apollo.StatusFailed {
			c.Failed++
		}
		want[rn.Job] = c
	}
	var m struct {
		Jobs []struct {
			Name string
			counts
		}
	}
	if code, err := harness.GetJSON(base+"/api/v1/metrics?window=1h&prefix=ovl_", &m); err != nil || code != 200 {
		return 0, fail("GET metrics: %d %v", code, err)
	}
	got := map[string]counts{}
	for _, j := range m.Jobs {
		got[j.Name] = j.counts
	}
	for job, w := range want {
		g := got[job]
		lost += max(0, w.Count-g.Count) + max(0, w.Started-g.Started)
		if g != w && err == nil {
			err = fail("%s: metrics say %+v, the acknowledged runs %+v", job, g, w)
		}
	}
	if len(got) != len(want) && err == nil {
		err = fail("metrics for %d jobs, %d jobs reported", len(got), len(want))
	}
	return lost, err
}
