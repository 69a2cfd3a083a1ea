package bus

import (
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
// final, and takes no event whatever its job. It never fails: the error
// is for a bus whose tasks are elsewhere (a cluster node's).
func (b *Bus) JobOf(tenant, taskID string) (string, error) {
	k := key{tenant: tenant, id: taskID}
	s, h := b.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.get(h, k); t != nil {
		return t.name, nil
	}
	return "", nil
}

// PageCursor is the cursor of the page that follows t: the listing
// order's key, base64url("<createdAt>:<taskID>"). List returns it as
// "next"; a node that merges pages of several buses writes it too.
func PageCursor(t *apollo.Task) string {
	return encodeCursor(listKey{at: t.CreatedAt, id: t.TaskID})
}

// CheckCursor returns the error List answers for a cursor it did not make.
func CheckCursor(s string) error {
	_, err := decodeCursor(s)
	return err
}

func encodeCursor(k listKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.at, 10) + ":" + k.id))
}

func decodeCursor(s string) (listKey, error) {
	bad := &apollo.Error{Code: apollo.EINVALID, Field: "cursor", Message: "not a cursor this server made", Hint: "pass the 'next' value of the previous page unchanged"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listKey{}, bad
	}
	ts, id, ok := strings.Cut(string(raw), ":")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		return listKey{}, bad
	}
	return listKey{at: n, id: id}, nil
}

// List returns the tasks in memory of f.Tenant that match f, in listing
// order (by createdAt, then task ID, both descending), and the cursor of
// the next page ("" on the last page). It reads the tenant's list from the
// cursor on, so a page costs the tasks it looks at: the page itself when
// nothing is filtered out, more when a filter (status, prefix, since,
// until) passes over tasks that do not match.
func (b *Bus) List(f apollo.TaskFilter) ([]apollo.Task, string, error) {
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	var from *listKey
	if f.Cursor != "" {
		k, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		from = &k
	}
	ts := b.knownTenant(f.Tenant)
	if ts == nil {
		return nil, "", nil
	}
	want := limit + 1 // one more says whether a next page exists
	out := make([]apollo.Task, 0, min(want, 128))
	var batch []*task
	for n := want; len(out) < want; n = min(2*n, 4096) {
		// Copy a batch of pointers under the tenant's lock, then read
		// each task under its shard's (the lock order, tenant.go).
		ts.mu.Lock()
		batch = ts.list.after(from, n, batch[:0])
		ts.mu.Unlock()
		if len(batch) == 0 {
			break
		}
		for _, t := range batch {
			s := &b.shards[t.shard]
			s.mu.Lock()
			if t.listed && matches(t, &f) {
				out = append(out, t.view(t.key()))
			}
			s.mu.Unlock()
			if len(out) == want {
				break
			}
		}
		k := batch[len(batch)-1].listKey()
		from = &k
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = PageCursor(&out[limit-1])
	}
	return out, next, nil
}

// matches reports whether t passes f's filters other than the tenant's.
func matches(t *task, f *apollo.TaskFilter) bool {
	switch {
	case t.status == apollo.StatusNone:
		return false
	case f.Status != apollo.StatusNone && t.status != f.Status:
		return false
	case f.Prefix != "" && !strings.HasPrefix(t.name, f.Prefix) && !strings.HasPrefix(t.id, f.Prefix):
		return false
	case f.Since > 0 && t.updatedAt < f.Since, f.Until > 0 && t.updatedAt >= f.Until:
		return false
	}
	return true
}
