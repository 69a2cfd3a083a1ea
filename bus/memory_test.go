package bus

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/apollo-11/apollo"
)

// heapPerTask publishes n tasks of two tenants (each of its events) into a
// bus without a log and returns the live heap they add, per task.
func heapPerTask(t *testing.T, n int, events func(tenant, id string) []apollo.Event) float64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := New(Options{Workers: 1, MaxTasks: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(context.Background())
	out := make([]Outcome, 3)
	for i := range n {
		tenant := []string{"acme", "globex"}[i%2]
		evs := events(tenant, fmt.Sprintf("scale-%07d", i))
		if err := b.Publish(context.Background(), evs, out); err != nil {
			t.Fatal(err)
		}
		for j := range evs {
			if out[j].Result != Accepted {
				t.Fatalf("%s %s: %+v", tenant, evs[j].TaskID, out[j])
			}
		}
	}
	b.Checkpoint(func(uint64) error { return nil }) // every change delivered
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := b.ntasks.Load(); got != int64(n) {
		t.Fatalf("%d tasks in memory, want %d", got, n)
	}
	runtime.KeepAlive(b)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// Issue 20.7: a task that reported only pending (the tasks of
// bench/cmd/scale) costs less heap: the task record is 16 bytes smaller
// (TestTaskRecordSize) and its job name and tenant are the bus's one copy
// (436 B before, 407 after, on the machine of docs/benchmarks.md).
func TestMemoryPerPendingTask(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 50 000 tasks")
	}
	const n = 50_000
	per := heapPerTask(t, n, func(tenant, id string) []apollo.Event {
		return []apollo.Event{{Tenant: tenant, TaskID: id, Name: "job_" + id[len(id)-3:], Sequence: 1, Status: apollo.StatusPending, Ts: 1e12}}
	})
	t.Logf("%d pending tasks of two tenants: %.0f B of heap per task", n, per)
	if per > 420 {
		t.Errorf("%.0f B of heap per pending task, over 420", per)
	}
}

// Issue 20.7: the task record is 160 bytes, a size class of Go's
// allocator; at 192 (the next class, where it was while it held its queue
// and waiting events itself) it cost 32 bytes more per task.
// A Change is written for every applied event and read by every observer;
// a chunk of changeChunk of them must stay under the 32 KiB above which
// the runtime gives an allocation pages of its own. Its Prev keeps only
// what observers compare (apollo.Before): a full Task made it 504 bytes.
func TestChangeSize(t *testing.T) {
	size := unsafe.Sizeof(apollo.Change{})
	if size > 408 {
		t.Errorf("apollo.Change is %d bytes, over 408", size)
	}
	if size*changeChunk > 32<<10 {
		t.Errorf("a chunk of %d changes is %d bytes, over 32 KiB", changeChunk, size*changeChunk)
	}
}

func TestTaskRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(task{}); got > 160 {
		t.Errorf("task is %d bytes, over 160: a million tasks take %d MB more than at 160", got, (got-160)*1_000_000/1e6)
	}
}

// A shard finds, lists and removes tasks whose keys hash alike: the second
// key of a hash lives beside the map of hashes. Keys of two tenants share
// one hash here, in every order of removal.
func TestShardHashCollisions(t *testing.T) {
	keys := []key{{"acme", "a"}, {"globex", "a"}, {"acme", "b"}, {"globex", "c"}}
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {2, 0, 3, 1}} {
		s := &shard{tasks: map[uint64]*task{}}
		const h = 42 // one hash for every key
		tasks := map[key]*task{}
		for _, k := range keys {
			tk := &task{id: k.id, tenant: k.tenant}
			tasks[k] = tk
			s.put(h, tk)
		}
		seen := 0
		s.each(func(hh uint64, tk *task) {
			seen++
			if tasks[tk.key()] != tk {
				t.Errorf("each gave %v, not the task put", tk.key())
			}
		})
		if seen != len(keys) {
			t.Errorf("each gave %d tasks, want %d", seen, len(keys))
		}
		for i, j := range order {
			k := keys[j]
			if got := s.get(h, k); got != tasks[k] {
				t.Fatalf("order %v: get %v before removing it: %p, want %p", order, k, got, tasks[k])
			}
			s.del(h, tasks[k])
			if got := s.get(h, k); got != nil {
				t.Fatalf("order %v: %v still found after del", order, k)
			}
			for _, rest := range order[i+1:] {
				if got := s.get(h, keys[rest]); got != tasks[keys[rest]] {
					t.Fatalf("order %v: %v lost after removing %v", order, keys[rest], k)
				}
			}
		}
		if len(s.tasks) != 0 || len(s.more) != 0 {
			t.Errorf("order %v: %d hashes and %d further tasks left", order, len(s.tasks), len(s.more))
		}
	}
}
