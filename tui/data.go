package tui

import (
	"cmp"
	"slices"

	"github.com/apollo-11/apollo"
)

// taskStore holds the newest tasks the stream sent, one per task ID, and
// lists them most recently updated first. It keeps at most max; past that
// the least recently updated go.
//
// A change re-sorts only itself: the changes since the last listing are
// sorted and merged into the list, so a busy stream costs O(held +
// changes·log changes) per message rather than a sort of everything.
type taskStore struct {
	max     int
	byID    map[string]*apollo.Task
	sorted  []*apollo.Task // as last listed
	spare   []*apollo.Task // the buffer the next listing is built in
	pending []*apollo.Task // changed since the last listing
	reset   bool           // a snapshot replaced everything
}

func newTaskStore(max int) *taskStore {
	return &taskStore{max: max, byID: map[string]*apollo.Task{}}
}

// replace drops everything and holds ts (a snapshot).
func (s *taskStore) replace(ts []apollo.Task) {
	clear(s.byID)
	s.pending = s.pending[:0]
	s.reset = true
	s.merge(ts)
}

// merge applies changes. A change older than the task held is ignored: a
// change listed in a snapshot may arrive again just after it
// (docs/stream.md).
func (s *taskStore) merge(ts []apollo.Task) {
	for i := range ts {
		t := &ts[i]
		if old, ok := s.byID[t.TaskID]; ok && !newer(t, old) {
			continue
		}
		p := new(apollo.Task)
		*p = *t
		s.byID[t.TaskID] = p
		s.pending = append(s.pending, p)
	}
	// Prune in batches so that a busy stream does not list on every message.
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

func byRecency(a, b *apollo.Task) int {
	return cmp.Or(cmp.Compare(b.UpdatedAt, a.UpdatedAt), cmp.Compare(a.TaskID, b.TaskID))
}

// list returns the tasks, most recently updated first, pruned to max. The
// slice and the tasks are the store's: valid until the next change.
func (s *taskStore) list() []*apollo.Task {
	if len(s.pending) == 0 && !s.reset {
		return s.sorted
	}
	current := func(t *apollo.Task) bool { return s.byID[t.TaskID] == t }
	// A task changed twice since the last listing is pending twice; only
	// its latest change is current.
	pend := slices.DeleteFunc(s.pending, func(t *apollo.Task) bool { return !current(t) })
	slices.SortFunc(pend, byRecency)
	old := s.sorted
	if s.reset {
		old = nil
	}
	out := s.spare[:0]
	i, j := 0, 0
	for i < len(old) || j < len(pend) {
		switch {
		case i < len(old) && !current(old[i]):
			i++ // replaced by a pending change, or dropped by a snapshot
		case j == len(pend) || i < len(old) && byRecency(old[i], pend[j]) <= 0:
			out = append(out, old[i])
			i++
		default:
			out = append(out, pend[j])
			j++
		}
	}
	for _, t := range out[min(len(out), s.max):] {
		delete(s.byID, t.TaskID)
	}
	out = out[:min(len(out), s.max)]
	clear(s.pending)
	s.pending, s.reset = s.pending[:0], false
	s.spare, s.sorted = s.sorted[:0], out
	return out
}
