package alert

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// Locker is the dedup lock taken before each notification: of every engine
// that asks for key within ttl, exactly one gets true. In Redis it is
// SET key value NX PX ttl, so two alert processes never both
// send; alerttest.RunLocker is the conformance suite every Locker passes.
type Locker interface {
	// Acquire returns true if it took key for ttl, false if key is held.
	// ttl is positive. An error means the lock could not be asked; the
	// engine then sends anyway, as losing an alert is worse than a rare
	// duplicate.
	Acquire(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// TakeOverLocker is a Locker whose locks name the process that holds
// them (redisstore.Locker): a notification taken over from dead
// processes (Engine.TakeOver) may take the lock one of them holds, since
// that process took it for this notification and never sent it.
type TakeOverLocker interface {
	Locker
	// AcquireFrom is Acquire that also takes key when it is held by one
	// of from.
	AcquireFrom(ctx context.Context, key string, ttl time.Duration, from []string) (bool, error)
}

// LockKeyPrefix starts every dedup lock key:
// LockKeyPrefix + tenant + ":" + Notification.DedupKey, the tenant
// escaped (internal/keypart) so that a tenant named "a:b" never takes the
// locks of tenant "a".
const LockKeyPrefix = "apollo:alert:dedup:"

// MemoryLocker is the Locker of a single process, or of engines in one
// process sharing it. Expired keys are swept as the map grows, so memory
// follows the keys of one window.
type MemoryLocker struct {
	clock     apollo.Clock
	mu        sync.Mutex
	held      map[string]time.Time // key -> expiry
	sweepSize int
}

var _ Locker = (*MemoryLocker)(nil)

// NewMemoryLocker returns an empty MemoryLocker on clock (nil: the system
// clock).
func NewMemoryLocker(clock apollo.Clock) *MemoryLocker {
	if clock == nil {
		clock = apollo.SystemClock
	}
	return &MemoryLocker{clock: clock, held: map[string]time.Time{}, sweepSize: 64}
}

// Acquire implements Locker.
func (l *MemoryLocker) Acquire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("alert: lock %q: %w", key, err)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("alert: lock %q: ttl %v is not positive", key, ttl)
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if exp, ok := l.held[key]; ok && now.Before(exp) {
		return false, nil
	}
	l.held[key] = now.Add(ttl)
	if len(l.held) >= l.sweepSize {
		for k, exp := range l.held {
			if !now.Before(exp) {
				delete(l.held, k)
			}
		}
		l.sweepSize = max(64, 2*len(l.held))
	}
	return true, nil
}
