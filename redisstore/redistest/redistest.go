// Package redistest gives tests a real Redis and a key prefix of their
// own, deleted when the test ends; a test whose keys remain after that
// fails. The processes a test starts reach Redis through URLFor, so that
// nothing they sent is run after the delete. Tests read
// APOLLO_TEST_REDIS (e.g. redis://127.0.0.1:6379/15); unset, they skip,
// unless APOLLO_REQUIRE_REDIS=1 makes that a failure (as .ci/run does).
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
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
// uses ("apollotest:<test name>:<random>"). When the test ends — after
// the cleanups registered later, which stop the processes it started —
// the connections named for the prefix (URLFor) are cut, every key under
// the prefix is deleted, and the test fails if any remains; the client
// is closed. Every transaction and script sent through the client must
// keep to one Redis Cluster slot (SlotAudit), or the test fails.
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
	audit := &SlotAudit{}
	c.AddHook(audit)
	prefix := Prefix(t)
	t.Cleanup(func() {
		defer c.Close()
		for _, crossed := range audit.Crossed() {
			t.Errorf("would be refused by Redis Cluster (CROSSSLOT): %s", crossed)
		}
		if err := leaveNothing(context.Background(), c, prefix); err != nil {
			t.Errorf("the test's keys under %s: %v", prefix, err)
		}
	})
	return c, prefix
}

// URLFor returns the test Redis's URL with prefix as the client name
// (go-redis's client_name): a process a test starts with it is known to
// Redis by the prefix, and Client's cleanup cuts its connections before
// it deletes the keys.
func URLFor(t testing.TB, prefix string) string {
	t.Helper()
	u, err := url.Parse(URL(t))
	if err != nil {
		t.Fatalf("APOLLO_TEST_REDIS: %v", err)
	}
	q := u.Query()
	q.Set("client_name", prefix)
	u.RawQuery = q.Encode()
	return u.String()
}

// leaveNothing deletes every key under prefix and says which remain.
// The connections named prefix are cut first: a process killed with
// SIGKILL is gone, but Redis may not have run what it had sent (a
// pipeline of a thousand writes is read a piece per turn of Redis's
// loop, between other clients' commands): run after the delete, it left
// keys behind. Redis runs nothing more of a connection it cut.
func leaveNothing(ctx context.Context, c redis.UniversalClient, prefix string) error {
	if err := cut(ctx, c, prefix); err != nil {
		return err
	}
	if err := Delete(ctx, c, prefix); err != nil {
		return err
	}
	left, err := Keys(ctx, c, prefix)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		slices.Sort(left)
		return fmt.Errorf("%d remain after they were deleted, written by something of the test that still runs (%s): "+
			"stop it in a cleanup registered after redistest.Client, or start it with redistest.URLFor", len(left), strings.Join(left[:min(len(left), 5)], ", "))
	}
	return nil
}

// cut closes every connection named name (URLFor).
func cut(ctx context.Context, c redis.UniversalClient, name string) error {
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return fmt.Errorf("listing the connections: %w", err)
	}
	for line := range strings.Lines(list) {
		var id, named string
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "id":
				id = v
			case "name":
				named = v
			}
		}
		if named != name {
			continue
		}
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return fmt.Errorf("a connection of CLIENT LIST without an id: %q", line)
		}
		if err := c.ClientKillByFilter(ctx, "ID", strconv.FormatInt(n, 10)).Err(); err != nil && !strings.Contains(err.Error(), "No such client") {
			return fmt.Errorf("cutting the connection %d: %w", n, err)
		}
	}
	return nil
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
