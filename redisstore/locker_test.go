package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The dedup lock lets one caller through per key and ttl, across lockers
// (two alert processes), and again once the ttl has passed.
func TestLocker(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	a, b := NewLocker(c, prefix+":"), NewLocker(c, prefix+":")
	acquire := func(l *Locker, key string, ttl time.Duration, want bool) {
		t.Helper()
		ok, err := l.Acquire(ctx, key, ttl)
		if err != nil || ok != want {
			t.Fatalf("Acquire(%q, %v) = %v, %v; want %v", key, ttl, ok, err, want)
		}
	}
	key := "apollo:alert:dedup:acme:rule/batch_"
	acquire(a, key, 2*time.Second, true)
	acquire(b, key, 2*time.Second, false)
	acquire(a, key, 2*time.Second, false) // not re-entrant
	acquire(b, key+":other", time.Minute, true)
	if ttl := c.PTTL(ctx, prefix+":"+key).Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("the lock's PTTL is %v, want (0, 2s]", ttl)
	}
	if err := redistest.Elapse(ctx, c, prefix, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	acquire(b, key, 2*time.Second, false)
	if err := redistest.Elapse(ctx, c, prefix, 600*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	acquire(b, key, 2*time.Second, true)
	acquire(a, key, 2*time.Second, false)

	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			ok, err := []*Locker{a, b}[i%2].Acquire(ctx, "race", time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d of 16 concurrent callers took the lock, want 1", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if ok, err := a.Acquire(cctx, "cancelled", time.Minute); err == nil || ok {
		t.Fatalf("a cancelled context: %v, %v; want an error", ok, err)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if ok, err := a.Acquire(ctx, "bad-ttl", ttl); err == nil || ok {
			t.Fatalf("ttl %v: %v, %v; want an error", ttl, ok, err)
		}
	}
	acquire(a, "sub-ms", 300*time.Microsecond, true) // rounded up to 1ms, not refused
}
