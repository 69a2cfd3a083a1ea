package main

import (
	"strings"
	"sync"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bench/internal/harness"
)

// newest returns up to n of the latest runs whose job starts with prefix.
func newest(runs []run, prefix string, n int) []run {
	var out []run
	for i := len(runs) - 1; i >= 0 && len(out) < n; i-- {
		if strings.HasPrefix(runs[i].job, prefix) {
			out = append(out, runs[i])
		}
	}
	return out
}

// readBack reads runs with GET /api/v1/tasks/ID, 8 at a time, and returns
// the events missing; any difference is an error.
func readBack(base string, runs []run) (lost int64, err error) {
	var (
		mu    sync.Mutex
		first error
	)
	harness.ForEach(len(runs), 8, func(i int) {
		rn := runs[i]
		var task apollo.Task
		code, gerr := harness.GetJSON(base+"/api/v1/tasks/"+rn.id, &task)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case gerr != nil:
			if first == nil {
				first = gerr
			}
		case code != 200 || task.Status != rn.final || task.Sequence != 3 || len(task.History) != 3:
			lost += int64(3 - len(task.History))
			if first == nil {
				first = fail("run %s: status %d, %v seq %d with %d records, want %v seq 3", rn.id, code, task.Status, task.Sequence, len(task.History), rn.final)
			}
		}
	})
	return lost, first
}

// recount compares GET /api/v1/metrics with a recount of every acknowledged
// run and returns the events it is short of.
func recount(base string, runs []run) (lost int64, err error) {
	type counts struct{ Count, Failed, Started, Running int64 }
	want := map[string]counts{}
	for _, rn := range runs {
		c := want[rn.job]
		c.Count++
		c.Started++
		if rn.final == apollo.StatusFailed {
			c.Failed++
		}
		want[rn.job] = c
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
