package metrics

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apollo-11/apollo"
)

// The ring moves its window through a larger array instead of moving its
// entries; whatever the order of new runs, updates and drops, it must hold
// what a plain sorted list of the newest runs holds, with each ID's hash
// beside it and no task ID kept in the array outside the window.
func TestRingMatchesSortedList(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 2, 7, filterFrom + 3, apollo.MaxRecentRuns} {
		for seed := range uint64(10) {
			t.Run(fmt.Sprintf("limit=%d/seed=%d", limit, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, uint64(limit)))
				var r jobRuns
				var model []apollo.RecentRun // the runs kept, sorted
				var gone []string            // runs that left the ring, or never entered it
				ts := int64(1_000_000)
				for op := range 20 * limit {
					var c apollo.Change
					switch x := rng.IntN(10); {
					case x < 6 || len(model) == 0: // a new run, mostly newer than the rest
						ts += rng.Int64N(3)
						at := ts
						if rng.IntN(4) == 0 {
							at -= rng.Int64N(int64(limit) + 5)
						}
						id := fmt.Sprintf("t%d", op)
						if len(model) > 0 && rng.IntN(8) == 0 { // an ID used again while its run is kept
							k := rng.IntN(len(model))
							id = model[k].TaskID
							model = slices.Delete(model, k, k+1)
						}
						c.Record.Ts = at
						c.Task = apollo.Task{TaskID: id, Status: apollo.StatusPending}
						run := apollo.RecentRun{TaskID: id, Status: apollo.StatusPending, ReportedAt: at}
						i, _ := slices.BinarySearchFunc(model, run, func(a, b apollo.RecentRun) int { return runOrder(&a, &b) })
						model = slices.Insert(model, i, run)
					case x < 8: // a later change of a run kept
						m := &model[rng.IntN(len(model))]
						c.Prev.Status = m.Status
						c.Task = apollo.Task{TaskID: m.TaskID, Status: apollo.StatusRunning, StartedAt: ts}
						m.Status, m.StartedAt = apollo.StatusRunning, ts
					case x < 9 && len(gone) > 0: // of a run gone: it stays out
						c.Prev.Status = apollo.StatusPending
						c.Task = apollo.Task{TaskID: gone[rng.IntN(len(gone))], Status: apollo.StatusRunning, StartedAt: ts}
					default: // a run moves to another job
						i := rng.IntN(len(model))
						r.drop(model[i].TaskID)
						model = slices.Delete(model, i, i+1)
					}
					if c.Task.TaskID != "" {
						r.put(&c, limit)
					}
					if n := len(model) - limit; n > 0 {
						for _, m := range model[:n] {
							gone = append(gone, m.TaskID)
						}
						model = slices.Delete(model, 0, n)
					}
					if !slices.Equal(r.ring, model) {
						t.Fatalf("op %d: ring\n%+v\nwant\n%+v", op, r.ring, model)
					}
					for i := range r.ring {
						if r.ids[i] != idHash(r.ring[i].TaskID) {
							t.Fatalf("op %d: ids[%d] is not the hash of %q", op, i, r.ring[i].TaskID)
						}
						if r.seen != nil && !r.seen.has(r.ids[i]) {
							t.Fatalf("op %d: the filter does not have %q", op, r.ring[i].TaskID)
						}
					}
					for i := range r.ringArr {
						if in := i >= cap(r.ringArr)-cap(r.ring) && i < cap(r.ringArr)-cap(r.ring)+len(r.ring); !in && r.ringArr[i].TaskID != "" {
							t.Fatalf("op %d: the array keeps %q outside the window", op, r.ringArr[i].TaskID)
						}
					}
				}
			})
		}
	}
}
