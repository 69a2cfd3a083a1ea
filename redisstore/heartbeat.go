package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
)

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
	// Stopped is the last beat of a process that shut down cleanly: the
	// others tell it from one that died, whose beat just expires.
	Stopped bool `json:"stopped,omitempty"`
}

// The heartbeats are found through an index, <prefix>:heartbeats: a
// sorted set of `<component>:<id>` (the key's tail), scored by when the
// beat's key expires, in Redis's own time (TIME), so that no process's
// clock decides what is pruned. Reading costs one script on the index
// and one pipeline of GETs: round trips by the processes that beat, not
// by the keys in the database. Before the index, every bus and alert
// process SCANned the whole database every half heartbeat interval
// (a million task keys: ten thousand round trips), and SCAN over a
// Redis Cluster visits one node only.
//
// Both scripts name the index alone, so they run in a Cluster whatever
// slot the heartbeat keys are in.
var (
	// KEYS[1] the index; ARGV: the member, its key's ttl (ms). The index
	// itself expires with the longest-lived beat in it: an abandoned
	// prefix leaves nothing.
	indexBeatScript = redis.NewScript(`if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call("TIME")
local ttl = tonumber(ARGV[2])
redis.call("ZADD", KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000) + ttl, ARGV[1])
if redis.call("PTTL", KEYS[1]) < ttl then redis.call("PEXPIRE", KEYS[1], ttl) end
return 1`)
	// KEYS[1] the index: drops the beats whose key has expired, returns
	// the others.
	readBeatsScript = redis.NewScript(`if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call("TIME")
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", "(" .. (t[1] * 1000 + math.floor(t[2] / 1000)))
return redis.call("ZRANGE", KEYS[1], 0, -1)`)
)

func beatIndex(prefix string) string { return prefix + ":heartbeats" }
func beatKeys(prefix string) string  { return prefix + ":heartbeat:" }

// Heartbeat writes <prefix>:heartbeat:<component>:<id> every Every; the
// key expires after three missed beats (the monitoring system must
// itself be monitored: docs/architecture.md, "Watching itself"). Each
// beat also puts the key in the index, <prefix>:heartbeats.
type Heartbeat struct {
	c      redis.UniversalClient
	prefix string
	member string // <component>:<id>
	beat   Beat
	stats  func() any
	// tenants are listed again at every beat (WithTenants): escaped.
	tenants []any
	clock   apollo.Clock
	life    lifecycle.Group // the beat loop
}

// NewHeartbeat returns a heartbeat for a component instance.
func NewHeartbeat(c redis.UniversalClient, prefix, component, id string, every time.Duration) *Heartbeat {
	host, _ := os.Hostname()
	return &Heartbeat{c: c, prefix: prefix, member: component + ":" + id, clock: apollo.SystemClock,
		life: lifecycle.Group{Name: "redisstore: heartbeat"},
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

// WithTenants makes every beat list tenants in <prefix>:tenants, as
// PrefixClash does at the start (prefixes.go): the list stays true after
// Redis lost its data, while the bus whose tenants they are runs. Call
// it before Start.
func (h *Heartbeat) WithTenants(tenants []string) *Heartbeat {
	h.tenants = tenantNames(tenants)
	return h
}

// Start beats now and every interval on the clock until Stop.
func (h *Heartbeat) Start(ctx context.Context) error {
	return h.life.Start(ctx, func(run context.Context) error {
		h.write(run)
		h.life.Tick(h.clock, h.beat.Every, func(ctx context.Context) { h.write(ctx) })
		return nil
	})
}

// write sets the beat's key, then indexes it, in one round trip: the
// index entry outlives the key by the few microseconds between them, and
// a reader that finds the key gone passes the entry over.
func (h *Heartbeat) write(ctx context.Context) error {
	b := h.beat
	b.At = h.clock.Now()
	if h.stats != nil {
		b.Stats = h.stats()
	}
	data, _ := json.Marshal(b)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ttl := 3 * h.beat.Every
	pipe := h.c.Pipeline()
	set := pipe.Set(ctx, beatKeys(h.prefix)+h.member, data, ttl)
	idx := indexBeatScript.Eval(ctx, pipe, []string{beatIndex(h.prefix)}, h.member, ttl.Milliseconds())
	var list *redis.IntCmd
	if len(h.tenants) > 0 {
		list = pipe.SAdd(ctx, tenantsKey(h.prefix), h.tenants...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	if err := set.Err(); err != nil {
		return err
	}
	if err := idx.Err(); err != nil {
		return fmt.Errorf("indexing the heartbeat in %s: %w", beatIndex(h.prefix), err)
	}
	if list != nil && list.Err() != nil {
		return fmt.Errorf("listing the tenants in %s: %w", tenantsKey(h.prefix), list.Err())
	}
	return nil
}

// Stop writes a last beat that says the process stopped cleanly, and
// stops beating: Alive no longer lists it, and a watcher that saw it
// alive knows it was not lost (Heartbeats). The last beat expires like
// any other.
// It returns the last beat's error.
func (h *Heartbeat) Stop(ctx context.Context) error {
	return h.life.StopThen(ctx, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		h.beat.Stopped = true
		if err := h.write(ctx); err != nil {
			return fmt.Errorf("redisstore: the last heartbeat: %w", err)
		}
		return nil
	})
}

// Alive returns the heartbeats of the processes running now.
func Alive(ctx context.Context, c redis.UniversalClient, prefix string) ([]Beat, error) {
	beats, err := Heartbeats(ctx, c, prefix)
	return slices.DeleteFunc(beats, func(b Beat) bool { return b.Stopped }), err
}

// Heartbeats returns every heartbeat in the index now: the running
// processes' and the last beats of those that stopped cleanly. A process
// of a build before the index is not in it: a watcher reads through a
// BeatReader, which finds those too.
func Heartbeats(ctx context.Context, c redis.UniversalClient, prefix string) ([]Beat, error) {
	return NewBeatReader(c, prefix).indexed(ctx, nil)
}

// BeatReader reads the heartbeats through the index, and the keys of the
// processes of the build before it, which beat without indexing: it
// finds those by a SCAN at its first read and at Rescan, and reads them
// directly from then on, until they expire. So a bus or alert process
// upgraded first still sees the others of the previous build, and does
// not call them down (docs/redis.md, "Heartbeats"). Safe for one
// goroutine at a time.
type BeatReader struct {
	c       redis.UniversalClient
	prefix  string
	log     *slog.Logger
	damaged *loglimit.Limiter
	mu      sync.Mutex
	scanned bool
	legacy  map[string]bool // members found by a scan and not in the index
}

// NewBeatReader returns a reader of the heartbeats of prefix.
func NewBeatReader(c redis.UniversalClient, prefix string) *BeatReader {
	return &BeatReader{c: c, prefix: prefix, legacy: map[string]bool{}, damaged: loglimit.New(time.Minute)}
}

// WithLogger makes the reader say, one line a minute, that the index is
// damaged (a key of another type in its place). Call it before Read.
func (r *BeatReader) WithLogger(log *slog.Logger) *BeatReader {
	r.log = log
	return r
}

// Read returns every heartbeat present now (a SCAN for the previous
// build's at the first call).
func (r *BeatReader) Read(ctx context.Context) ([]Beat, error) {
	r.mu.Lock()
	scan := !r.scanned
	r.mu.Unlock()
	if scan {
		return r.Rescan(ctx)
	}
	return r.indexed(ctx, r.legacyMembers())
}

// Rescan is Read with a SCAN of the database for the keys of the
// previous build's processes: as costly as the database is large, for a
// watcher about to call a kind of process down.
func (r *BeatReader) Rescan(ctx context.Context) ([]Beat, error) {
	members, err := r.scan(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.scanned = true
	for _, m := range members {
		r.legacy[m] = true
	}
	r.mu.Unlock()
	return r.indexed(ctx, r.legacyMembers())
}

func (r *BeatReader) legacyMembers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.legacy))
	for m := range r.legacy {
		out = append(out, m)
	}
	return out
}

// scan returns the members of every heartbeat key in the database, on
// every master of a Cluster.
func (r *BeatReader) scan(ctx context.Context) ([]string, error) {
	var (
		mu  sync.Mutex
		out []string
	)
	pattern := beatKeys(r.prefix) + "*"
	one := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			out = append(out, strings.TrimPrefix(iter.Val(), beatKeys(r.prefix)))
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return one(ctx, c) })
	} else {
		err = one(ctx, r.c)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: looking for heartbeats: %w", err)
	}
	return out, nil
}

// indexed reads the beats of the index and of extra, and forgets the
// extra members whose key is gone.
func (r *BeatReader) indexed(ctx context.Context, extra []string) ([]Beat, error) {
	members, err := readBeatsScript.Run(ctx, r.c, []string{beatIndex(r.prefix)}).StringSlice()
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Redis answered, and refused: a key of another type holds the
		// index's name (WRONGTYPE). The heartbeats are still there: read
		// them as the build before the index did, and say so, rather
		// than see no process (or keep the last view) until someone
		// looks.
		if r.log != nil {
			if ok, held := r.damaged.Allow("", time.Now()); ok {
				r.log.Error("redisstore: the heartbeat index cannot be read; reading the heartbeats by a SCAN of the database, which costs as much as the database is large, until it is deleted (this process's and the others' next beats make it again)",
					"key", beatIndex(r.prefix), "err", err, "fix", "redis-cli DEL "+beatIndex(r.prefix), "suppressed", held)
			}
		}
		members, err = r.scan(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: reading the heartbeat index %s: %w", beatIndex(r.prefix), err)
	}
	for _, m := range extra {
		if !slices.Contains(members, m) {
			members = append(members, m)
		}
	}
	if len(members) == 0 {
		return nil, nil
	}
	pipe := r.c.Pipeline()
	gets := make([]*redis.StringCmd, len(members))
	for i, m := range members {
		gets[i] = pipe.Get(ctx, beatKeys(r.prefix)+m)
	}
	_, _ = pipe.Exec(ctx) // each GET's error is looked at below
	var out []Beat
	for i, g := range gets {
		data, err := g.Bytes()
		if errors.Is(err, redis.Nil) {
			r.forget(members[i]) // expired
			continue
		}
		if err != nil {
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				return nil, fmt.Errorf("redisstore: reading the heartbeats: %w", err)
			}
			continue // WRONGTYPE: not a heartbeat
		}
		var b Beat
		if json.Unmarshal(data, &b) == nil {
			out = append(out, b)
		}
	}
	return out, nil
}

func (r *BeatReader) forget(member string) {
	r.mu.Lock()
	delete(r.legacy, member)
	r.mu.Unlock()
}
