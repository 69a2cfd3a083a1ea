package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/lifecycle"
)

// Rules is the rules text of every tenant set through the API (and the
// default tenant's rules file, for the bus to show), in the hash
// <prefix>:alert:rules. It is configuration: it has no TTL. Alert
// processes read it at start and again every evaluation interval, so
// that what they evaluate is what the bus shows (docs/redis.md).
type Rules struct {
	c     redis.UniversalClient
	key   string
	clock apollo.Clock
}

var _ alert.RuleStore = (*Rules)(nil)

// NewRules returns the rules store of prefix.
func NewRules(c redis.UniversalClient, prefix string) *Rules {
	return &Rules{c: c, key: prefix + ":alert:rules", clock: apollo.SystemClock}
}

// WithClock makes Follow tick on clock (default: the system clock).
func (r *Rules) WithClock(clock apollo.Clock) *Rules {
	r.clock = clock
	return r
}

// Save records src as the tenant's rules. Earlier versions gave the key a
// TTL; PERSIST takes it off.
func (r *Rules) Save(ctx context.Context, tenant string, src []byte) error {
	pipe := r.c.TxPipeline()
	pipe.HSet(ctx, r.key, tenantField(tenant), src)
	pipe.Persist(ctx, r.key)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisstore: saving the rules of tenant %q: %w", tenant, err)
	}
	return nil
}

// Refill writes back the rules text of every tenant in srcs that the hash
// lacks, after Redis lost its data (Keeper); a tenant's text another
// process wrote meanwhile is left alone.
func (r *Rules) Refill(ctx context.Context, srcs map[string][]byte) error {
	if len(srcs) == 0 {
		return nil
	}
	pipe := r.c.Pipeline()
	for tenant, src := range srcs {
		pipe.HSetNX(ctx, r.key, tenantField(tenant), src)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisstore: writing the rules back: %w", err)
	}
	return nil
}

// Load returns every tenant's rules text.
func (r *Rules) Load(ctx context.Context) (map[string][]byte, error) {
	m, err := r.c.HGetAll(ctx, r.key).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: loading the rules: %w", err)
	}
	out := make(map[string][]byte, len(m))
	for f, src := range m {
		if tenant, ok := strings.CutPrefix(f, "t:"); ok {
			out[tenant] = []byte(src)
		}
	}
	return out, nil
}

// Source returns the rules text of a tenant, nil if none.
func (r *Rules) Source(ctx context.Context, tenant string) ([]byte, error) {
	src, err := r.c.HGet(ctx, r.key, tenantField(tenant)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return src, err
}

// Follow reads every tenant's rules every interval and hands them (or
// the error) to apply, until the returned function is called. The
// commands of the bus apply a change at once; this catches a process up
// with one it missed (it was reconnecting to Redis when it was published).
func (r *Rules) Follow(ctx context.Context, every time.Duration, apply func(map[string][]byte, error)) (stop func()) {
	g := &lifecycle.Group{Name: "redisstore: rules"}
	g.Start(ctx, func(context.Context) error {
		g.Tick(r.clock, every, func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, every)
			defer cancel()
			apply(r.Load(ctx))
		})
		return nil
	})
	return func() { g.Stop(context.Background(), nil) }
}

func tenantField(t string) string { return "t:" + t }
