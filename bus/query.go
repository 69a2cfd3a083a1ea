package bus

import (
	"container/heap"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/apollo-11/apollo"
)

// Get returns a task with its history: from memory, or from the archive
// once it has left memory.
func (b *Bus) Get(tenant, taskID string) (*apollo.Task, error) {
	k := key{tenant: tenant, id: taskID}
	s, h := b.locate(k)
	s.mu.Lock()
	t := s.get(h, k)
	if t != nil && t.status != apollo.StatusNone {
		v := t.view(k)
		v.History = t.decodeHistory(k)
		s.mu.Unlock()
		return &v, nil
	}
	s.mu.Unlock()
	if b.opts.Archive != nil {
		v, err := b.opts.Archive.Get(tenant, taskID)
		if err != nil {
			return nil, fmt.Errorf("bus: reading the archive: %w", err)
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, &apollo.Error{Code: apollo.ENOTFOUND, Field: "taskID", Message: fmt.Sprintf("no task %q", taskID)}
}

// JobOf returns the job a task in memory belongs to, or "" when there is
// no such task. It never reads the archive: a task that left memory is
// final, and takes no event whatever its job.
func (b *Bus) JobOf(tenant, taskID string) string {
	k := key{tenant: tenant, id: taskID}
	s, h := b.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.get(h, k); t != nil {
		return t.name
	}
	return ""
}

// cursor orders tasks newest first: by UpdatedAt descending, then task ID.
type cursor struct {
	updated int64
	id      string
}

func (c cursor) before(o cursor) bool { // c comes before o in the listing
	if c.updated != o.updated {
		return c.updated > o.updated
	}
	return c.id < o.id
}

func encodeCursor(c cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.updated, 10) + ":" + c.id))
}

func decodeCursor(s string) (cursor, error) {
	bad := &apollo.Error{Code: apollo.EINVALID, Field: "cursor", Message: "not a cursor this server made", Hint: "pass the 'next' value of the previous page unchanged"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	ts, id, ok := strings.Cut(string(raw), ":")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		return cursor{}, bad
	}
	return cursor{updated: n, id: id}, nil
}

// List returns the tasks in memory that match f, newest first, and the
// cursor of the next page ("" on the last page).
func (b *Bus) List(f apollo.TaskFilter) ([]apollo.Task, string, error) {
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	var after *cursor
	if f.Cursor != "" {
		c, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &c
	}
	// Keep the best limit+1 in a heap whose top is the last of them.
	h := &pageHeap{}
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		s.each(func(_ uint64, t *task) {
			k := t.key()
			if !matches(k, t, &f) {
				return
			}
			c := cursor{updated: t.updatedAt, id: k.id}
			if after != nil && !after.before(c) {
				return
			}
			if h.Len() <= limit {
				heap.Push(h, pageItem{c: c, t: t.view(k)})
			} else if c.before((*h)[0].c) {
				(*h)[0] = pageItem{c: c, t: t.view(k)}
				heap.Fix(h, 0)
			}
		})
		s.mu.Unlock()
	}
	items := make([]pageItem, h.Len())
	for i := len(items) - 1; i >= 0; i-- {
		items[i] = heap.Pop(h).(pageItem)
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		next = encodeCursor(items[limit-1].c)
	}
	out := make([]apollo.Task, len(items))
	for i, it := range items {
		out[i] = it.t
	}
	return out, next, nil
}

func matches(k key, t *task, f *apollo.TaskFilter) bool {
	switch {
	case t.status == apollo.StatusNone:
		return false
	case k.tenant != f.Tenant:
		return false
	case f.Status != apollo.StatusNone && t.status != f.Status:
		return false
	case f.Prefix != "" && !strings.HasPrefix(t.name, f.Prefix) && !strings.HasPrefix(k.id, f.Prefix):
		return false
	case f.Since > 0 && t.updatedAt < f.Since, f.Until > 0 && t.updatedAt >= f.Until:
		return false
	}
	return true
}

type pageItem struct {
	c cursor
	t apollo.Task
}

// pageHeap is a max-heap by listing order: the top is the item that would
// be listed last, the first to drop when a better one comes.
type pageHeap []pageItem

func (h pageHeap) Len() int           { return len(h) }
func (h pageHeap) Less(i, j int) bool { return h[j].c.before(h[i].c) }
func (h pageHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pageHeap) Push(x any)        { *h = append(*h, x.(pageItem)) }
func (h *pageHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
