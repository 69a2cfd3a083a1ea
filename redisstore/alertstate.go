package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// Lease makes one alert process the leader: the one that saves the shared
// alert state and the rules the bus shows. All of them evaluate and send
// (the dedup lock keeps a notification single); leadership only decides
// whose view is written down. The lease is `SET key id NX PX ttl`, renewed
// every ttl/3 with a compare-and-expire script.
type Lease struct {
	c       redis.UniversalClient
	key, id string
	ttl     time.Duration
	clock   apollo.Clock
	held    atomic.Bool
	loop    *ticking
}

var renewScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)

// NewLease returns a lease on <prefix>:alert:leader for the process id.
func NewLease(c redis.UniversalClient, prefix, id string, ttl time.Duration) *Lease {
	return &Lease{c: c, key: prefix + ":alert:leader", id: id, ttl: ttl, clock: apollo.SystemClock}
}

// WithClock makes the renewal loop tick on clock (default: the system
// clock). Call it before Start.
func (l *Lease) WithClock(clock apollo.Clock) *Lease {
	l.clock = clock
	return l
}

// Start tries to take the lease now, then keeps renewing or retrying.
func (l *Lease) Start(ctx context.Context) {
	l.Renew(ctx)
	l.loop = startTicking(l.clock, l.ttl/3, func() { l.Renew(ctx) })
}

// Renew keeps the lease if this process holds it, or takes it if it is
// free. The loop calls it every ttl/3.
func (l *Lease) Renew(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	if l.held.Load() {
		n, err := renewScript.Run(ctx, l.c, []string{l.key}, l.id, l.ttl.Milliseconds()).Int()
		l.held.Store(err == nil && n == 1)
		if err == nil && n == 1 {
			return
		}
	}
	ok, err := l.c.SetNX(ctx, l.key, l.id, l.ttl).Result()
	l.held.Store(err == nil && ok)
}

// Held reports whether this process leads now.
func (l *Lease) Held() bool { return l.held.Load() }

// Stop gives the lease up, so another process leads at once. Idempotent.
func (l *Lease) Stop() {
	l.loop.stop(func() {
		if l.held.Swap(false) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = releaseScript.Run(ctx, l.c, []string{l.key}, l.id).Err()
		}
	})
}

// Leader returns the id of the leading alert process, "" if none.
func Leader(ctx context.Context, c redis.UniversalClient, prefix string) (string, error) {
	id, err := c.Get(ctx, prefix+":alert:leader").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return id, err
}

// stateTTL keeps the shared alert state for a week after the last save:
// long enough for any outage, short enough that an abandoned prefix goes.
const stateTTL = 7 * 24 * time.Hour

// AlertState is the alert engine's StateStore in Redis. Every alert
// process loads it at start (so they begin from the same alerts); only the
// leader saves.
type AlertState struct {
	c     redis.UniversalClient
	key   string
	lease *Lease // nil: always save (tests, a single alert process)
}

var _ alert.StateStore = (*AlertState)(nil)

// NewAlertState returns the state store at <prefix>:alert:state.
func NewAlertState(c redis.UniversalClient, prefix string, lease *Lease) *AlertState {
	return &AlertState{c: c, key: prefix + ":alert:state", lease: lease}
}

// Load implements alert.StateStore.
func (s *AlertState) Load(ctx context.Context) (alert.State, error) {
	var st alert.State
	data, err := s.c.Get(ctx, s.key).Bytes()
	if errors.Is(err, redis.Nil) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("redisstore: loading alert state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("redisstore: alert state at %s is damaged (%v); delete the key to start over", s.key, err)
	}
	return st, nil
}

// Save implements alert.StateStore: the leader writes, others skip.
func (s *AlertState) Save(ctx context.Context, st alert.State) error {
	if s.lease != nil && !s.lease.Held() {
		return nil
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return s.c.Set(ctx, s.key, data, stateTTL).Err()
}

// SaveRulesSource records the rules text a tenant runs with, for the bus to
// show (the leader calls it after every load).
func SaveRulesSource(ctx context.Context, c redis.UniversalClient, prefix, tenant string, src []byte) error {
	key := prefix + ":alert:rules"
	pipe := c.TxPipeline()
	pipe.HSet(ctx, key, tenantField(tenant), src)
	pipe.Expire(ctx, key, stateTTL)
	_, err := pipe.Exec(ctx)
	return err
}

// RulesSource returns the rules text of a tenant, nil if none.
func RulesSource(ctx context.Context, c redis.UniversalClient, prefix, tenant string) ([]byte, error) {
	src, err := c.HGet(ctx, prefix+":alert:rules", tenantField(tenant)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return src, err
}

func tenantField(t string) string { return "t:" + t }

// Beat is one process's heartbeat.
type Beat struct {
	Component string        `json:"component"` // bus, alert, sched
	ID        string        `json:"id"`
	Host      string        `json:"host"`
	PID       int           `json:"pid"`
	At        time.Time     `json:"at"`
	Every     time.Duration `json:"every"`
	// Stats are what the process reports of itself (the alert process: its
	// evaluation and deliveries), shown by the bus's /api/v1/system.
	Stats any `json:"stats,omitempty"`
}

// Heartbeat writes <prefix>:heartbeat:<component>:<id> every Every; the
// key expires after three missed beats (seed 5.1: the monitoring system
// must itself be monitored).
type Heartbeat struct {
	c     redis.UniversalClient
	key   string
	beat  Beat
	stats func() any
	clock apollo.Clock
	loop  *ticking
}

// NewHeartbeat returns a heartbeat for a component instance.
func NewHeartbeat(c redis.UniversalClient, prefix, component, id string, every time.Duration) *Heartbeat {
	host, _ := os.Hostname()
	return &Heartbeat{c: c, key: prefix + ":heartbeat:" + component + ":" + id, clock: apollo.SystemClock,
		beat: Beat{Component: component, ID: id, Host: host, PID: os.Getpid(), Every: every}}
}

// WithClock makes the beats tick on clock, and stamps them with it
// (default: the system clock). Call it before Start.
func (h *Heartbeat) WithClock(clock apollo.Clock) *Heartbeat {
	h.clock = clock
	return h
}

// WithStats makes every beat carry stats(). Call it before Start.
func (h *Heartbeat) WithStats(stats func() any) *Heartbeat {
	h.stats = stats
	return h
}

// Start beats now and every interval until Stop.
func (h *Heartbeat) Start(ctx context.Context) {
	h.write(ctx)
	h.loop = startTicking(h.clock, h.beat.Every, func() { h.write(ctx) })
}

func (h *Heartbeat) write(ctx context.Context) {
	b := h.beat
	b.At = h.clock.Now()
	if h.stats != nil {
		b.Stats = h.stats()
	}
	data, _ := json.Marshal(b)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = h.c.Set(ctx, h.key, data, 3*h.beat.Every).Err()
}

// Stop removes the heartbeat: a clean stop is not an outage.
func (h *Heartbeat) Stop() {
	h.loop.stop(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = h.c.Del(ctx, h.key).Err()
	})
}

// Alive returns the heartbeats present now.
func Alive(ctx context.Context, c redis.UniversalClient, prefix string) ([]Beat, error) {
	var out []Beat
	iter := c.Scan(ctx, 0, prefix+":heartbeat:*", 100).Iterator()
	for iter.Next(ctx) {
		data, err := c.Get(ctx, iter.Val()).Bytes()
		if err != nil {
			continue // expired between SCAN and GET
		}
		var b Beat
		if json.Unmarshal(data, &b) == nil {
			out = append(out, b)
		}
	}
	return out, iter.Err()
}
