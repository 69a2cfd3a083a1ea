package loglimit

import (
	"sync"
	"time"
)

// Limiter lets one log line per key through per period and counts the rest.
// Keys name kinds of line ("queue", "dropped on channel X"); a caller with
// one kind uses one key, "" for instance. The time comes from the caller's
// clock, so a fake clock moves the period too. A Limiter is safe for
// concurrent use.
type Limiter struct {
	every time.Duration
	mu    sync.Mutex
	keys  map[string]slot
}

// slot is one key's last line and the lines held back since.
type slot struct {
	last time.Time
	held int
}

// New returns a Limiter that lets one line of each key through per every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, keys: map[string]slot{}}
}

// Allow reports whether a line of key may be logged at now and, when it
// may, how many lines of key were held back since the last one (the
// caller logs it as "suppressed"). The first line of a key always goes
// through.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, seen := l.keys[key]
	if seen && now.Sub(s.last) < l.every {
		s.held++
		l.keys[key] = s
		return false, 0
	}
	l.keys[key] = slot{last: now}
	return true, s.held
}
