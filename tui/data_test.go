package tui

import (
	"fmt"
	"testing"

	"github.com/apollo-11/apollo"
)

func TestTaskStoreNewerWins(t *testing.T) {
	t.Parallel()
	s := newTaskStore(10)
	base := apollo.Task{TaskID: "t", Status: apollo.StatusRunning, Sequence: 2, UpdatedAt: 100}
	s.replace([]apollo.Task{base})
	tests := []struct {
		name string
		in   apollo.Task
		want apollo.Status
	}{
		{"older sequence ignored", apollo.Task{TaskID: "t", Status: apollo.StatusPending, Sequence: 1, UpdatedAt: 200}, apollo.StatusRunning},
		{"same sequence, older update ignored", apollo.Task{TaskID: "t", Status: apollo.StatusSuccess, Sequence: 2, UpdatedAt: 50}, apollo.StatusRunning},
		{"same sequence, later update (a timeout) taken", apollo.Task{TaskID: "t", Status: apollo.StatusTimeout, Sequence: 2, UpdatedAt: 300}, apollo.StatusTimeout},
		{"later sequence taken", apollo.Task{TaskID: "t", Status: apollo.StatusFailed, Sequence: 3, UpdatedAt: 250}, apollo.StatusFailed},
	}
	for _, tt := range tests {
		s.merge([]apollo.Task{tt.in})
		if got := s.list()[0].Status; got != tt.want {
			t.Errorf("%s: status %v, want %v", tt.name, got, tt.want)
		}
	}
	s.replace(nil)
	if n := len(s.list()); n != 0 {
		t.Errorf("a snapshot of nothing left %d tasks", n)
	}
}

func TestTaskStoreBounded(t *testing.T) {
	t.Parallel()
	s := newTaskStore(100)
	for i := range 1000 {
		s.merge([]apollo.Task{{TaskID: fmt.Sprintf("t%04d", i), Sequence: 1, UpdatedAt: int64(i)}})
		if len(s.byID) > 100+100/8+1 {
			t.Fatalf("holding %d tasks after %d, over the bound", len(s.byID), i+1)
		}
	}
	l := s.list()
	if len(l) != 100 || l[0].TaskID != "t0999" || l[99].TaskID != "t0900" {
		t.Fatalf("kept %d tasks, %s..%s; want the newest 100", len(l), l[0].TaskID, l[len(l)-1].TaskID)
	}
}

// TestTaskStoreOrder: the merged list is the same as sorting everything,
// whatever the mix of new tasks, changed ones (some twice before a
// listing), stale changes and snapshots.
func TestTaskStoreOrder(t *testing.T) {
	t.Parallel()
	s := newTaskStore(50)
	want := map[string]apollo.Task{}
	rng := uint64(1)
	next := func(n int) int { rng = rng*6364136223846793005 + 1442695040888963407; return int(rng>>33) % n }
	for round := range 300 {
		if round%97 == 0 { // a snapshot
			var snap []apollo.Task
			clear(want)
			for i := range next(20) {
				tk := apollo.Task{TaskID: fmt.Sprintf("t%02d", i), Sequence: 5, UpdatedAt: int64(1000 + next(100))}
				snap = append(snap, tk)
				want[tk.TaskID] = tk
			}
			s.replace(snap)
		}
		var batch []apollo.Task
		for range 1 + next(5) {
			id := fmt.Sprintf("t%02d", next(40))
			tk := apollo.Task{TaskID: id, Sequence: int64(next(10)), UpdatedAt: int64(next(2000))}
			batch = append(batch, tk)
			if old, ok := want[id]; !ok || newer(&tk, &old) {
				want[id] = tk
			}
		}
		s.merge(batch)
		if next(3) == 0 {
			continue // list only now and then: changes pile up
		}
		got := s.list()
		if len(got) != len(want) {
			t.Fatalf("round %d: %d tasks, want %d", round, len(got), len(want))
		}
		for i, tk := range got {
			if w := want[tk.TaskID]; w.Sequence != tk.Sequence || w.UpdatedAt != tk.UpdatedAt {
				t.Fatalf("round %d: %s is %+v, want %+v", round, tk.TaskID, *tk, w)
			}
			if i > 0 && byRecency(got[i-1], tk) > 0 {
				t.Fatalf("round %d: %s before %s", round, got[i-1].TaskID, tk.TaskID)
			}
		}
	}
}
