package metrics

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A page and its total are what Summaries gives for the same jobs, for
// every window, prefix and place in the list: after Apply, after a
// compaction, and after a snapshot is read back (the tenant's sums are
// rebuilt from its jobs). Two tenants: neither's total has the other's
// runs.
func TestPageIsSummariesCutToAPage(t *testing.T) {
	t.Parallel()
	a, clock := newTestAggregator(t, Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	now := t0.UnixMilli()
	for i := range 600 {
		tenant := []string{"acme", "globex"}[i%2]
		name := fmt.Sprintf("job_%d_%03d", i%7, i)
		for r := range 1 + rng.IntN(4) {
			id := fmt.Sprintf("%s-%d", name, r)
			start := now - rng.Int64N(2*3600_000)
			c := change(tenant, name, apollo.StatusPending, apollo.StatusRunning, start)
			c.Record.TaskID, c.Task.TaskID = id, id
			a.Apply(c)
			if rng.IntN(5) == 0 {
				continue // still running: a gauge
			}
			end := []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout}[rng.IntN(3)]
			d := change(tenant, name, apollo.StatusRunning, end, start+rng.Int64N(600_000))
			d.Record.TaskID, d.Task.TaskID = id, id
			d.Task.CostMs = 1 + rng.Int64N(600_000)
			a.Apply(d)
		}
	}
	var seen apollo.Summary // every total compared: some must have runs
	check := func(when string) {
		t.Helper()
		ctx := context.Background()
		for _, tenant := range []string{"acme", "globex", "nobody"} {
			for _, w := range []time.Duration{time.Minute, 5 * time.Minute, time.Hour, 3 * time.Hour} {
				for _, prefix := range []string{"", "job_3", "job_9"} {
					var names []string
					var rows []apollo.Summary
					want, err := a.Summaries(ctx, tenant, prefix, w, time.Time{}, func(name string, s *apollo.Summary) {
						names, rows = append(names, name), append(rows, *s)
					})
					if err != nil {
						t.Fatal(err)
					}
					for _, after := range []string{"", "job_2", "job_3_100", "zzz"} {
						const limit = 17
						var got []string
						total, more, err := a.Page(ctx, tenant, prefix, after, limit, w, time.Time{}, func(name string, s *apollo.Summary) {
							got = append(got, name)
							i := len(got) - 1
							for i < len(names) && names[i] != name {
								i++
							}
							if i == len(names) || *s != rows[i] {
								t.Errorf("%s: %s %v %q after %q: %s is %+v, want %+v", when, tenant, w, prefix, after, name, *s, rows[min(i, len(rows)-1)])
							}
						})
						if err != nil {
							t.Fatal(err)
						}
						var wantNames []string
						for _, n := range names {
							if n > after {
								wantNames = append(wantNames, n)
							}
						}
						wantMore := len(wantNames) > limit
						wantNames = wantNames[:min(len(wantNames), limit)]
						if fmt.Sprint(got) != fmt.Sprint(wantNames) || more != wantMore {
							t.Errorf("%s: %s %v %q after %q: %v (more %v), want %v (more %v)", when, tenant, w, prefix, after, got, more, wantNames, wantMore)
						}
						seen.Add(total)
						if total != want {
							t.Errorf("%s: %s %v %q: total %+v, want %+v", when, tenant, w, prefix, total, want)
						}
					}
				}
			}
		}
	}
	check("applied")
	clock.Advance(70 * time.Minute) // the first buckets go to the rollups
	a.compact(clock.Now())
	check("compacted")
	var buf bytes.Buffer
	if err := a.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b, _ := New(Options{Clock: clock})
	if err := b.ReadSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	a = b
	check("read back")
	if seen.Count == 0 || seen.Running == 0 || seen.CostN == 0 {
		t.Errorf("the totals compared had no runs, running tasks or costs: %+v", seen)
	}
}
