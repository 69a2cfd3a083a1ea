package tui

import (
	"cmp"
	"slices"

	"github.com/apollo-11/apollo"
)

// taskStore holds the newest tasks the stream sent, one per task ID, and
// lists them newest first. It keeps at most max; past that the least
// recently updated go.
type taskStore struct {
	max    int
	byID   map[string]apollo.Task
	sorted []apollo.Task
	dirty  bool
}

func newTaskStore(max int) *taskStore {
	return &taskStore{max: max, byID: map[string]apollo.Task{}}
}

// replace drops everything and holds ts (a snapshot).
func (s *taskStore) replace(ts []apollo.Task) {
	clear(s.byID)
	s.merge(ts)
	s.dirty = true
}

// merge applies changes. A change older than the task held is ignored: a
// change listed in a snapshot may arrive again just after it
// (docs/stream.md).
func (s *taskStore) merge(ts []apollo.Task) {
	for _, t := range ts {
		if old, ok := s.byID[t.TaskID]; ok && !newer(&t, &old) {
			continue
		}
		s.byID[t.TaskID] = t
		s.dirty = true
	}
	// Prune in batches so a busy stream does not sort on every message.
	if len(s.byID) > s.max+s.max/8 {
		s.list()
	}
}

// newer reports whether a is not older than b: a later sequence, or the
// same sequence updated no earlier (a correction or a timeout keeps the
// sequence of the last report).
func newer(a, b *apollo.Task) bool {
	return a.Sequence > b.Sequence || a.Sequence == b.Sequence && a.UpdatedAt >= b.UpdatedAt
}

// list returns the tasks, most recently updated first, pruned to max. The
// slice is reused: it is valid until the next change.
func (s *taskStore) list() []apollo.Task {
	if !s.dirty {
		return s.sorted
	}
	s.sorted = s.sorted[:0]
	for _, t := range s.byID {
		s.sorted = append(s.sorted, t)
	}
	slices.SortFunc(s.sorted, func(a, b apollo.Task) int {
		return cmp.Or(cmp.Compare(b.UpdatedAt, a.UpdatedAt), cmp.Compare(a.TaskID, b.TaskID))
	})
	if len(s.sorted) > s.max {
		for _, t := range s.sorted[s.max:] {
			delete(s.byID, t.TaskID)
		}
		s.sorted = s.sorted[:s.max]
	}
	s.dirty = false
	return s.sorted
}
