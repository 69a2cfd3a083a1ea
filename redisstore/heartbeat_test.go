package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// counting counts the round trips a client makes (a pipeline is one).
// Warm its connections up before counting: a new connection's set-up
// counts too.
type counting struct{ n atomic.Int64 }

func (c *counting) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// Reading the heartbeats costs round trips by the processes that beat,
// not by the keys in the database: a DB that holds a million task keys
// beside them was SCANned whole by every bus and alert process every half
// heartbeat interval (and SCAN over a Redis Cluster visits one node).
func TestHeartbeatsCostProcessesNotKeys(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	// 20 000 keys that are not heartbeats, under the same prefix.
	pipe := c.Pipeline()
	for i := range 20_000 {
		pipe.Set(ctx, fmt.Sprintf("%s:task:{t%d}:events", prefix, i), "x", time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "a2"} {
		h := redisstore.NewHeartbeat(c, prefix, "alert", id, time.Hour)
		if err := h.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer h.Stop(ctx)
	}
	bus := redisstore.NewHeartbeat(c, prefix, "bus", "b1", time.Hour)
	bus.Start(ctx)
	bus.Stop(ctx) // a clean stop: its last beat is read too

	cnt := &counting{}
	rc := redis.NewClient(c.Options())
	defer rc.Close()
	rc.AddHook(cnt)
	redisstore.Heartbeats(ctx, rc, prefix) // warms the connections up
	cnt.n.Store(0)
	beats, err := redisstore.Heartbeats(ctx, rc, prefix)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, b := range beats {
		got[b.Component+":"+b.ID] = b.Stopped
	}
	if len(got) != 3 || got["alert:a1"] || got["alert:a2"] || !got["bus:b1"] {
		t.Fatalf("beats %+v", beats)
	}
	// The index's script and the GETs' pipeline.
	if n := cnt.n.Load(); n > 2 {
		t.Fatalf("reading 3 heartbeats beside 20 000 other keys took %d round trips, want 2", n)
	}
}

// A heartbeat that expired leaves the index at the next read: the index
// does not grow with every process that ever ran.
func TestHeartbeatIndexForgetsExpiredBeats(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	h := redisstore.NewHeartbeat(c, prefix, "alert", "gone", 100*time.Millisecond)
	h.Start(ctx)
	h.Stop(ctx)
	live := redisstore.NewHeartbeat(c, prefix, "bus", "b", time.Hour)
	live.Start(ctx)
	defer live.Stop(ctx)
	// The short beat's key expires 300 ms after its last beat.
	deadline := time.Now().Add(testwait.Timeout(t))
	for {
		beats, err := redisstore.Heartbeats(ctx, c, prefix)
		if err != nil {
			t.Fatal(err)
		}
		n := c.ZCard(ctx, prefix+":heartbeats").Val()
		if len(beats) == 1 && beats[0].ID == "b" && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("beats %+v, the index holds %d entries: want the live one alone", beats, n)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// A process of the previous build writes its heartbeat key and no index
// entry. A reader finds it by the scan it makes at its first read, and
// reads it directly from then on, until it expires; a beat of the
// previous build that starts later is found when a watcher is about to
// call its kind down (Rescan).
func TestHeartbeatOfThePreviousBuildIsRead(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	old := func(component, id string) {
		data, _ := json.Marshal(redisstore.Beat{Component: component, ID: id, Host: "h", PID: 1, At: time.Now(), Every: time.Second})
		c.Set(ctx, prefix+":heartbeat:"+component+":"+id, data, 3*time.Second)
	}
	old("alert", "old1")
	r := redisstore.NewBeatReader(c, prefix)
	beats, err := r.Read(ctx)
	if err != nil || len(beats) != 1 || beats[0].ID != "old1" {
		t.Fatalf("first read %+v, %v", beats, err)
	}
	old("bus", "old2") // started after the first read
	cnt := &counting{}
	rc := redis.NewClient(c.Options())
	defer rc.Close()
	rc.AddHook(cnt)
	r2 := redisstore.NewBeatReader(rc, prefix)
	if _, err := r2.Read(ctx); err != nil {
		t.Fatal(err)
	}
	cnt.n.Store(0)
	if beats, _ := r2.Read(ctx); len(beats) != 2 || cnt.n.Load() > 2 {
		t.Fatalf("a later read: %+v in %d round trips", beats, cnt.n.Load())
	}
	if beats, _ := r.Read(ctx); len(beats) != 1 {
		t.Fatalf("a later read found a beat it was not told to look for: %+v", beats)
	}
	if beats, _ := r.Rescan(ctx); len(beats) != 2 {
		t.Fatalf("rescan %+v", beats)
	}
	c.Del(ctx, prefix+":heartbeat:alert:old1")
	if beats, _ := r.Read(ctx); len(beats) != 1 || beats[0].ID != "old2" {
		t.Fatalf("after the old beat expired: %+v", beats)
	}
}

// A key of another type under the index's name: the beats are read by a
// scan, and the reader says so, naming the key and the fix.
func TestHeartbeatIndexOfAnotherType(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	h := redisstore.NewHeartbeat(c, prefix, "bus", "b", time.Hour)
	h.Start(ctx)
	defer h.Stop(ctx)
	c.Del(ctx, prefix+":heartbeats")
	c.Set(ctx, prefix+":heartbeats", "junk", time.Hour)
	var logs strings.Builder
	r := redisstore.NewBeatReader(c, prefix).WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	r.Read(ctx) // the first read scans anyway
	beats, err := r.Read(ctx)
	if err != nil || len(beats) != 1 || beats[0].ID != "b" {
		t.Fatalf("beats %+v, %v", beats, err)
	}
	if !strings.Contains(logs.String(), "the heartbeat index cannot be read") || !strings.Contains(logs.String(), "redis-cli DEL "+prefix+":heartbeats") {
		t.Fatalf("the reader says:\n%s", logs.String())
	}
}
