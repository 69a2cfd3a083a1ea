package stream

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/apollo-11/apollo"
)

// entry is one change as the stream keeps it: enough to filter it, and the
// task already encoded once for every client.
type entry struct {
	cursor uint64
	tenant string
	taskID string
	name   string
	status uint8        // statusBits of the change
	task   *apollo.Task // nil marks a gap: changes the hub never saw
	json   []byte       // the task's JSON, encoded when first sent
}

// data returns the task's JSON, encoding it the first time: most changes
// are never sent (no client watches them), so most are never encoded. The
// hub's lock is held.
func (e *entry) data() []byte {
	if e.json == nil && e.task != nil {
		var err error
		if e.json, err = json.Marshal(e.task); err != nil { // cannot happen for a task the bus applied
			e.json = []byte(`{}`)
		}
	}
	return e.json
}

// ring keeps the last len(slots) entries, so that a client that comes back
// with a recent cursor gets only what it missed.
type ring struct {
	slots []*entry
	last  uint64 // cursor of the newest entry; 0 before the first
	// floor is the lowest cursor a client may resume from: the hub lost
	// changes just after floor-1 (its bus subscription was cut off).
	floor uint64
}

func newRing(size int) *ring { return &ring{slots: make([]*entry, size)} }

func (r *ring) add(e *entry) {
	r.last = e.cursor
	r.slots[e.cursor%uint64(len(r.slots))] = e
}

// gap records that changes were lost after the newest cursor: it uses up a
// cursor of its own, so that every cursor handed out before it is too old
// to resume from, and every one after is fine.
func (r *ring) gap() uint64 {
	c := r.last + 1
	r.add(&entry{cursor: c})
	r.floor = c
	return c
}

// since returns the entries after cursor that match, newest state of each
// task only, oldest first; ok is false when cursor is not resumable (too
// old, from the future, or before a gap) and the client needs a snapshot.
func (r *ring) since(cursor uint64, tenant string, f *streamFilter) (out []*entry, ok bool) {
	oldest := uint64(1)
	if r.last > uint64(len(r.slots)) {
		oldest = r.last - uint64(len(r.slots)) + 1
	}
	if cursor > r.last || cursor+1 < oldest || cursor < r.floor {
		return nil, false
	}
	index := map[string]int{}
	for c := cursor + 1; c <= r.last; c++ {
		e := r.slots[c%uint64(len(r.slots))]
		if e.task == nil || e.tenant != tenant || !f.matchTask(e.name, e.taskID, e.status) {
			continue
		}
		if i, seen := index[e.taskID]; seen {
			out[i] = e
			continue
		}
		index[e.taskID] = len(out)
		out = append(out, e)
	}
	return out, true
}

// Cursors are "<epoch>.<n>": the epoch is random per hub, so a cursor from
// before a restart is never mistaken for one of this run.
func formatCursor(epoch string, n uint64) string {
	return epoch + "." + strconv.FormatUint(n, 10)
}

func parseCursor(epoch, s string) (uint64, bool) {
	e, n, ok := strings.Cut(s, ".")
	if !ok || e != epoch {
		return 0, false
	}
	v, err := strconv.ParseUint(n, 10, 64)
	return v, err == nil
}
