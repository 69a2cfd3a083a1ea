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
