// Package redistest gives tests a real Redis and a key prefix of their
// own, deleted when the test ends. Tests read APOLLO_TEST_REDIS (e.g.
// redis://127.0.0.1:6379/15); unset, they skip, unless
// APOLLO_REQUIRE_REDIS=1 makes that a failure (as .ci/run does).
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL returns APOLLO_TEST_REDIS, or skips the test (fails it when
// APOLLO_REQUIRE_REDIS=1).
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("APOLLO_TEST_REDIS")
	if u == "" {
		unavailable(t, "APOLLO_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/15)")
	}
	return u
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("APOLLO_REQUIRE_REDIS") == "1" {
		t.Fatalf("Redis is required (APOLLO_REQUIRE_REDIS=1): %s", why)
	}
	t.Skipf("no Redis for this test: %s", why)
}

// Client returns a client of the test Redis and a prefix no other test
// uses ("apollotest:<test name>:<random>"). Every key under the prefix is
// deleted, and the client closed, when the test ends.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opts, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("APOLLO_TEST_REDIS: %v", err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		unavailable(t, fmt.Sprintf("%s does not answer: %v", opts.Addr, err))
	}
	prefix := Prefix(t)
	t.Cleanup(func() {
		defer c.Close()
		if err := Delete(context.Background(), c, prefix); err != nil {
			t.Errorf("deleting the test's keys under %s: %v", prefix, err)
		}
	})
	return c, prefix
}

// Prefix returns "apollotest:<test name>:<random>", the name reduced to
// characters that need no quoting in a key pattern.
func Prefix(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, t.Name())
	return fmt.Sprintf("apollotest:%s:%08x", name, rand.Uint32())
}

// Keys returns every key under prefix.
func Keys(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	var keys []string
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// Delete removes every key under prefix.
func Delete(ctx context.Context, c redis.UniversalClient, prefix string) error {
	keys, err := Keys(ctx, c, prefix)
	if err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// Elapse makes d pass for the expiries of the keys under prefix: each
// key's remaining time is cut by d, and keys whose time runs out are
// deleted. Tests of expiring locks use it instead of sleeping.
func Elapse(ctx context.Context, c redis.UniversalClient, prefix string, d time.Duration) error {
	keys, err := Keys(ctx, c, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return err
		}
		switch {
		case ttl < 0: // no expiry, or gone meanwhile
		case ttl <= d:
			err = c.Del(ctx, k).Err()
		default:
			err = c.PExpire(ctx, k, ttl-d).Err()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
