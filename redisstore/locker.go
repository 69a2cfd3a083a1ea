package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker is the alert engine's dedup lock in Redis: of every process that
// asks for a key within its ttl, exactly one gets true (invariant 6 in
// docs/architecture.md). It satisfies alert.Locker.
type Locker struct {
	c      redis.UniversalClient
	prefix string
	// token marks this process's locks, so that an operator can tell in
	// redis-cli who holds one.
	token string
}

// NewLocker returns a Locker whose key in Redis is prefix+key. The alert
// engine's keys are complete ("apollo:alert:dedup:..."): give it "" then;
// a non-empty prefix keeps another deployment's or a test's locks apart.
func NewLocker(c redis.UniversalClient, prefix string) *Locker {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Locker{c: c, prefix: prefix, token: hex.EncodeToString(b[:])}
}

// Acquire takes key for ttl with SET key token NX PX ttl and reports
// whether it did. ttl must be positive; it is rounded up to a millisecond.
// It is not re-entrant: asking again for a key this Locker holds gives
// false, as a second send would be a duplicate too.
func (l *Locker) Acquire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("redisstore: lock %q: ttl %v is not positive", key, ttl)
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	ok, err := l.c.SetNX(ctx, l.prefix+key, l.token, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("redisstore: lock %q: %w", key, err)
	}
	return ok, nil
}
