package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/alert"
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

var _ alert.TakeOverLocker = (*Locker)(nil)

// WithOwner has the locks hold owner, the process's outbox ID, rather than
// a random token: a process that takes over what a dead one decided
// (alert.Engine.TakeOver) knows the locks the dead one took
// (AcquireFrom). Call it before the first Acquire.
func (l *Locker) WithOwner(owner string) *Locker {
	l.token = owner
	return l
}

// acquireFromScript sets KEYS[1] to ARGV[1] for ARGV[2] ms if it is free
// or holds one of ARGV[3..], and reports whether it did.
var acquireFromScript = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
local take = not v
for i = 3, #ARGV do
  if v == ARGV[i] then take = true end
end
if not take then return 0 end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return 1
`)

// AcquireFrom implements alert.TakeOverLocker: Acquire, and a lock held
// by one of from (dead processes; WithOwner) is taken from it.
func (l *Locker) AcquireFrom(ctx context.Context, key string, ttl time.Duration, from []string) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("redisstore: lock %q: ttl %v is not positive", key, ttl)
	}
	ms := ((ttl + time.Millisecond - 1).Truncate(time.Millisecond)).Milliseconds()
	args := append([]any{l.token, ms}, anys(from)...)
	n, err := acquireFromScript.Run(ctx, l.c, []string{l.prefix + key}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("redisstore: lock %q: %w", key, err)
	}
	return n == 1, nil
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
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
