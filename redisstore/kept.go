package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
)

// Redis can lose what the alert processes keep there while they run: a
// restart without persistence, a FLUSHDB, a failover to a replica that had
// not caught up. The rules, acks and silences are configuration, written
// once when they change; the alert state is written when it changes. A
// process that still holds them all in memory must write them back, or
// the bus shows nothing and the next alert process to start runs no API
// rules, forgets the silences and acks, and notifies every alert again.
//
// A Keeper tells such a loss from a field deleted on purpose (a silence
// removed through another process): each process keeps a marker of its
// own, <prefix>:alert:kept:<id>, rewritten every interval with SET GET,
// one command. Finding its marker gone means Redis lost it, and the
// process writes back what it holds, never over what another process
// wrote meanwhile (HSETNX, SET NX).

// keptTTL is how long a process's marker outlives its last check: longer
// than any pause of a live process, short enough that the markers of
// killed processes do not pile up.
const keptTTL = time.Hour

// Keeper checks every interval that Redis still holds this process's
// marker, and calls refill when it does not.
type Keeper struct {
	c      redis.UniversalClient
	key    string
	every  time.Duration
	clock  apollo.Clock
	log    *slog.Logger
	refill func(ctx context.Context) error
	set    bool // the marker was written once: its absence is a loss
	retry  bool // the last refill failed
	life   lifecycle.Group
}

// NewKeeper returns a Keeper of the alert process id that calls refill
// when Redis lost its data.
func NewKeeper(c redis.UniversalClient, prefix, id string, every time.Duration, log *slog.Logger, refill func(ctx context.Context) error) *Keeper {
	return &Keeper{c: c, key: prefix + ":alert:kept:" + id, every: every, clock: apollo.SystemClock, log: log, refill: refill,
		life: lifecycle.Group{Name: "redisstore: keeper"}}
}

// WithClock makes the checks tick on clock. Call it before Start.
func (k *Keeper) WithClock(clock apollo.Clock) *Keeper {
	k.clock = clock
	return k
}

// Start writes the marker now, then checks it every interval until Stop.
func (k *Keeper) Start(ctx context.Context) error {
	return k.life.Start(ctx, func(run context.Context) error {
		k.Check(run)
		k.life.Tick(k.clock, k.every, func(ctx context.Context) { k.Check(ctx) })
		return nil
	})
}

// Stop ends the checks and deletes the marker. Idempotent.
func (k *Keeper) Stop(ctx context.Context) error {
	return k.life.StopThen(ctx, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return k.c.Del(ctx, k.key).Err()
	})
}

// Check rewrites the marker and, if it was gone, refills. A Redis that
// does not answer is no loss: nothing is known. The loop calls it.
func (k *Keeper) Check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(k.every, time.Second))
	defer cancel()
	err := k.c.SetArgs(ctx, k.key, "1", redis.SetArgs{TTL: keptTTL, Get: true}).Err()
	lost := errors.Is(err, redis.Nil) && k.set
	if err != nil && !errors.Is(err, redis.Nil) {
		return
	}
	k.set = true
	if !lost && !k.retry {
		return
	}
	if lost {
		k.log.Warn("redisstore: Redis lost what the alert processes keep there (restarted empty, flushed, or failed over); writing back this process's rules, alerts, acks, silences and owed notifications")
	}
	err = k.refill(ctx)
	if k.retry = err != nil; k.retry {
		k.log.Error("redisstore: writing back to Redis failed; trying again at the next check", "err", err)
	}
}
