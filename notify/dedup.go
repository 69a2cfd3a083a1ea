package notify

import "time"

// dedup remembers which DedupKeys a lane let through, and when, so that the
// same notification is sent once per window. Only the lane's goroutine uses
// it. Entries older than the window are swept when the map has doubled
// since the last sweep, so memory follows the number of distinct keys in
// one window, not the number ever seen.
type dedup struct {
	window    time.Duration
	seen      map[string]time.Time
	sweepSize int
}

func newDedup(window time.Duration) *dedup {
	return &dedup{window: window, seen: make(map[string]time.Time), sweepSize: 64}
}

// admit reports whether a notification with key, enqueued at, should go
// on; it records the key when it does. An empty key is never deduplicated.
func (d *dedup) admit(key string, at time.Time) bool {
	if key == "" || d.window <= 0 {
		return true
	}
	if last, ok := d.seen[key]; ok && at.Sub(last) < d.window {
		return false
	}
	d.seen[key] = at
	if len(d.seen) >= d.sweepSize {
		for k, t := range d.seen {
			if at.Sub(t) >= d.window {
				delete(d.seen, k)
			}
		}
		d.sweepSize = max(64, 2*len(d.seen))
	}
	return true
}
