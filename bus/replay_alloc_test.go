package bus

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"

	"github.com/apollo-11/apollo"
)

// statusCounter is an observer that keeps nothing of a change but counts,
// per tenant, the transitions it saw; it allocates nothing once it has
// seen each kind.
type statusCounter struct {
	mu sync.Mutex
	n  map[transition]int
}

type transition struct {
	tenant     string
	prev, to   apollo.Status
	mismatched bool // the task's names are not the record's
}

func (o *statusCounter) Apply(c *apollo.Change) {
	k := transition{tenant: c.Task.Tenant, prev: c.Prev.Status, to: c.Task.Status,
		mismatched: c.Task.Tenant != c.Record.Tenant || c.Task.Name != c.Record.Name || c.Task.TaskID != c.Record.TaskID}
	o.mu.Lock()
	o.n[k]++
	o.mu.Unlock()
}

// Issue 20.4: replay allocates no Change per record (a worker rewrites one)
// and no string for a record's tenant or job name (the bus keeps one copy
// of each). Runs of two tenants report pending, running and success; what
// is left per record is the task, its history and its ID (one of each per
// run, over its three records) and the task ID of the two later records.
func TestReplayAllocations(t *testing.T) {
	const runs = 3000
	var recs [][]byte
	for i := range runs {
		for j, st := range []apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess} {
			r := apollo.Record{Event: apollo.Event{Tenant: []string{"acme", "globex"}[i%2], TaskID: fmt.Sprintf("r-%05d", i),
				Name: fmt.Sprintf("job_%d", i%10), Sequence: int64(j + 1), Status: st, Ts: t0.UnixMilli() + int64(j)*1000},
				ReceivedAt: t0.UnixMilli() + int64(j)*1000}
			recs = append(recs, appendRecord(nil, &r))
		}
	}
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			obs := &statusCounter{n: map[transition]int{}}
			b, err := New(Options{Observers: []Observer{obs}, Logger: slog.New(slog.DiscardHandler), Clock: apollo.NewFakeClock(t0)})
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if workers == 0 {
				for i, p := range recs {
					if err := b.Replay(uint64(i+1), p); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				rp := b.NewReplayer(workers)
				for i, p := range recs {
					if err := rp.Add(uint64(i+1), p); err != nil {
						t.Fatal(err)
					}
				}
				if err := rp.Finish(); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perRecord := float64(after.Mallocs-before.Mallocs) / float64(len(recs))
			t.Logf("%d records: %.2f allocations, %.0f bytes per record", len(recs), perRecord, float64(after.TotalAlloc-before.TotalAlloc)/float64(len(recs)))
			if perRecord > 2 {
				t.Errorf("replay allocated %.2f objects per record, over 2", perRecord)
			}
			for _, tenant := range []string{"acme", "globex"} {
				for _, tr := range []transition{{prev: apollo.StatusNone, to: apollo.StatusPending},
					{prev: apollo.StatusPending, to: apollo.StatusRunning}, {prev: apollo.StatusRunning, to: apollo.StatusSuccess}} {
					tr.tenant = tenant
					if got := obs.n[tr]; got != runs/2 {
						t.Errorf("%+v: %d changes, want %d (all: %v)", tr, got, runs/2, obs.n)
					}
				}
			}
			if len(obs.n) != 6 {
				t.Errorf("changes seen: %v, want only the three transitions of each tenant", obs.n)
			}
			if got := len(snapshotTasks(b)); got != runs {
				t.Errorf("%d tasks after replay, want %d", got, runs)
			}
			if err := b.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := b.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
