package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo/redisstore/redistest"
)

// What the locker conformance suite (TestLockerConformance: one winner
// per key and ttl across lockers, expiry, concurrent callers, a cancelled
// context) cannot see of the Redis locker: the lock is a key whose PTTL is
// the ttl, a ttl of zero or less is refused, and one under a millisecond
// is rounded up rather than refused.
func TestLocker(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	l := NewLocker(c, prefix+":")
	acquire := func(key string, ttl time.Duration, want bool) {
		t.Helper()
		ok, err := l.Acquire(ctx, key, ttl)
		if err != nil || ok != want {
			t.Fatalf("Acquire(%q, %v) = %v, %v; want %v", key, ttl, ok, err, want)
		}
	}
	key := "apollo:alert:dedup:acme:rule/batch_"
	acquire(key, 2*time.Second, true)
	if ttl := c.PTTL(ctx, prefix+":"+key).Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("the lock's PTTL is %v, want (0, 2s]", ttl)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if ok, err := l.Acquire(ctx, "bad-ttl", ttl); err == nil || ok {
			t.Fatalf("ttl %v: %v, %v; want an error", ttl, ok, err)
		}
	}
	acquire("sub-ms", 300*time.Microsecond, true) // rounded up to 1ms, not refused
}
