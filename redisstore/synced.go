package redisstore

import (
	"context"
	"maps"
	"sync"

	"github.com/redis/go-redis/v9"
)

// syncedHash keeps a Redis hash in step with what one process holds,
// field by field: a save writes the fields that are new or changed since
// the process last read or wrote the hash, and deletes the ones it held
// and no longer does. Several processes may write one hash; one that
// missed a change leaves the others' fields alone.
type syncedHash struct {
	key  string
	mu   sync.Mutex
	last map[string]string
}

func newSyncedHash(key string) *syncedHash { return &syncedHash{key: key, last: map[string]string{}} }

// took records m, the whole hash as just read, as what this process
// holds, and returns it.
func (h *syncedHash) took(m map[string]string) map[string]string {
	h.mu.Lock()
	h.last = maps.Clone(m)
	h.mu.Unlock()
	return m
}

// queue adds to pipe what brings the hash from the last state to want,
// and returns the function to call once pipe has run.
func (h *syncedHash) queue(ctx context.Context, pipe redis.Pipeliner, want map[string]string) (done func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var set []any
	var del []string
	for f, v := range want {
		if old, ok := h.last[f]; !ok || old != v {
			set = append(set, f, v)
		}
	}
	for f := range h.last {
		if _, ok := want[f]; !ok {
			del = append(del, f)
		}
	}
	if len(set) > 0 {
		pipe.HSet(ctx, h.key, set...)
	}
	if len(del) > 0 {
		pipe.HDel(ctx, h.key, del...)
	}
	return func() {
		h.mu.Lock()
		h.last = want
		h.mu.Unlock()
	}
}

// queueRefill adds to pipe what writes back every field this process
// holds that the hash lacks, leaving the fields it has alone: after Redis
// lost the hash, another process may have written it back first.
func (h *syncedHash) queueRefill(ctx context.Context, pipe redis.Pipeliner) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f, v := range h.last {
		pipe.HSetNX(ctx, h.key, f, v)
	}
}
