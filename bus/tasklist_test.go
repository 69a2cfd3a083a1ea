package bus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// The list holds exactly the tasks inserted and not removed, in reverse
// listing order, whatever the order of inserts and removals (ties in
// createdAt included), and its chunks stay bounded and filled.
func TestTaskListProperty(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var l taskList
		var in []*task
		for step := range 6000 {
			if len(in) > 0 && rng.IntN(10) < 4 { // remove one
				i := rng.IntN(len(in))
				if !l.remove(in[i]) {
					t.Fatalf("seed %d step %d: %v was not found", seed, step, in[i].listKey())
				}
				in = slices.Delete(in, i, i+1)
			} else {
				// Mostly newer than the rest, sometimes older, often tied.
				at := int64(step/3) - int64(rng.IntN(4))*int64(rng.IntN(50))
				tk := &task{id: fmt.Sprintf("t%05d", rng.IntN(100000)), createdAt: at}
				if slices.ContainsFunc(in, func(o *task) bool { return o.listKey() == tk.listKey() }) {
					continue
				}
				l.insert(tk)
				in = append(in, tk)
			}
			if step%500 == 0 || step == 5999 {
				checkTaskList(t, &l, in)
			}
		}
		if l.remove(&task{id: "absent"}) {
			t.Fatal("removing a task that is not in the list succeeded")
		}
	}
}

func checkTaskList(t *testing.T, l *taskList, in []*task) {
	t.Helper()
	want := slices.Clone(in)
	slices.SortFunc(want, func(a, b *task) int {
		if a.listKey().before(b.listKey()) {
			return -1
		}
		return 1
	})
	got := l.after(nil, len(in)+1, nil)
	if !slices.Equal(got, want) || l.n != len(in) {
		t.Fatalf("the list holds %d tasks (n %d), not the %d inserted in listing order", len(got), l.n, len(in))
	}
	for _, c := range l.chunks {
		if len(c) == 0 || len(c) > chunkMax || cap(c) != chunkMax {
			t.Fatalf("a chunk of %d tasks (capacity %d)", len(c), cap(c))
		}
	}
	if len(in) > 0 && len(l.chunks) > len(in)/32+2 {
		t.Fatalf("%d chunks for %d tasks: under a quarter full", len(l.chunks), len(in))
	}
	// Paging from any task's key gives the tasks after it.
	for _, i := range []int{0, len(want) / 3, len(want) - 1} {
		if i < 0 || i >= len(want) {
			continue
		}
		k := want[i].listKey()
		if got := l.after(&k, 5, nil); !slices.Equal(got, want[i+1:min(i+6, len(want))]) {
			t.Fatalf("after %v: %d tasks, not the next ones", k, len(got))
		}
	}
}

// Every page of every filter, followed to the end, gives exactly what
// filtering all the tasks gives, in listing order: the index changes what
// a page costs, not what it says.
func TestListFiltersMatchAFullScan(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rng := rand.New(rand.NewPCG(7, 7))
	var all []apollo.Task // every task, as published last
	for i := range 700 {
		tenant := []string{"a", "b"}[i%2]
		id := fmt.Sprintf("%s-%04d", []string{"nightly", "hourly", "adhoc"}[rng.IntN(3)], i)
		st := apollo.Statuses()[rng.IntN(3)] // pending, running, success
		e := apollo.Event{TaskID: id, Name: "job_" + id[:3], Tenant: tenant, Sequence: 1, Status: st, Ts: t0.UnixMilli()}
		f.publish(t, e)
		if rng.IntN(4) == 0 {
			f.clock.Advance(time.Duration(rng.IntN(3)) * time.Millisecond) // ties and steps
		}
		if i > 0 && rng.IntN(5) == 0 { // change an older task: its place must not move
			e.Sequence, e.Status = 2, apollo.StatusFailed
			f.clock.Advance(time.Millisecond)
			f.publish(t, e)
		}
	}
	// The reference: every task in the shards, filtered by hand.
	for i := range f.bus.shards {
		s := &f.bus.shards[i]
		s.mu.Lock()
		s.each(func(_ uint64, tk *task) { all = append(all, tk.view(tk.key())) })
		s.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b apollo.Task) int {
		if (listKey{a.CreatedAt, a.TaskID}).before(listKey{b.CreatedAt, b.TaskID}) {
			return -1
		}
		return 1
	})
	mid := all[len(all)/2].UpdatedAt
	filters := []apollo.TaskFilter{
		{Tenant: "a"}, {Tenant: "b", Limit: 7}, {Tenant: "a", Status: apollo.StatusFailed, Limit: 3},
		{Tenant: "b", Prefix: "job_hou", Limit: 11}, {Tenant: "a", Prefix: "adhoc-00"}, {Tenant: "a", Since: mid, Limit: 5},
		{Tenant: "b", Until: mid, Status: apollo.StatusRunning, Limit: 2}, {Tenant: "nobody"},
	}
	for _, flt := range filters {
		var want []string
		for _, tk := range all {
			if tk.Tenant == flt.Tenant && (flt.Status == apollo.StatusNone || tk.Status == flt.Status) &&
				(flt.Prefix == "" || strings.HasPrefix(tk.Name, flt.Prefix) || strings.HasPrefix(tk.TaskID, flt.Prefix)) &&
				(flt.Since == 0 || tk.UpdatedAt >= flt.Since) && (flt.Until == 0 || tk.UpdatedAt < flt.Until) {
				want = append(want, tk.TaskID)
			}
		}
		var got []string
		for pages := 0; ; pages++ {
			page, next, err := f.bus.List(flt)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range page {
				got = append(got, tk.TaskID)
			}
			if next == "" {
				break
			}
			if len(page) == 0 || pages > 1000 {
				t.Fatalf("%+v: an empty page with a next cursor", flt)
			}
			flt.Cursor = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: paging gave %d tasks, a full scan %d (or in another order)", flt, len(got), len(want))
		}
	}
}

// Tasks that leave memory leave the list, and their tenant's count.
func TestSweptTasksLeaveTheList(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.Retention = time.Minute })
	for i := range 300 {
		st := apollo.StatusSuccess
		if i%3 == 0 {
			st = apollo.StatusRunning
		}
		f.publish(t, apollo.Event{TaskID: fmt.Sprintf("s-%03d", i), Tenant: []string{"a", "b"}[i%2], Sequence: 1, Status: st, Ts: t0.UnixMilli()})
	}
	f.bus.WaitDrained(context.Background())
	f.clock.Advance(2 * time.Minute)
	f.bus.Sweep()
	for _, tenant := range []string{"a", "b"} {
		page, next, _ := f.bus.List(apollo.TaskFilter{Tenant: tenant, Limit: 1000})
		ts := f.bus.knownTenant(tenant)
		if len(page) != 50 || next != "" || ts.list.n != 50 || ts.tasks.Load() != 50 {
			t.Errorf("tenant %s after the sweep: %d listed, %d in the list, %d counted; want the 50 running", tenant, len(page), ts.list.n, ts.tasks.Load())
		}
		for _, tk := range page {
			if tk.Status != apollo.StatusRunning {
				t.Errorf("a swept task is still listed: %+v", tk)
			}
		}
	}
}
