package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logEvery is how often one kind of line (say "dropped on channel X") may be
// logged. A dead channel or a storm would otherwise write a line per
// notification; the next line that gets through says how many were held back.
const logEvery = 10 * time.Second

type logLimiter struct {
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// allow reports whether a line with key may be logged at now, and how many
// lines with that key were held back since the last one.
func (ll *logLimiter) allow(key string, now time.Time) (bool, int) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.last == nil {
		ll.last, ll.suppressed = map[string]time.Time{}, map[string]int{}
	}
	if last, ok := ll.last[key]; ok && now.Sub(last) < logEvery {
		ll.suppressed[key]++
		return false, 0
	}
	n := ll.suppressed[key]
	ll.last[key] = now
	delete(ll.suppressed, key)
	return true, n
}

// logLimited logs msg at level unless a line with the same key was logged
// within logEvery.
func (d *Dispatcher) logLimited(level slog.Level, key, msg string, attrs ...slog.Attr) {
	ok, held := d.logs.allow(key, d.clock.Now())
	if !ok {
		return
	}
	if held > 0 {
		attrs = append(attrs, slog.Int("suppressed", held))
	}
	d.opts.Logger.LogAttrs(context.Background(), level, msg, attrs...)
}
