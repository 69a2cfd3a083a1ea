package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The bus's loops of the three-process mode (flusher, change feed,
// heartbeat) tick on the server's clock, not the system's: on a fake clock
// the heartbeat is stamped with the fake time and beats again only when
// that clock has moved an interval. They ticked on the real clock before.
func TestBusLoopsTickOnTheServersClock(t *testing.T) {
	url := redisURL(t)
	c, err := redisstore.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prefix := fmt.Sprintf("apollotest:life:%08x", rand.Uint32())
	defer redistest.Delete(context.Background(), c, prefix)
	cfg := config.Default()
	cfg.Redis.Prefix = prefix
	clock := apollo.NewFakeClock(time.Date(2031, 1, 2, 3, 4, 0, 0, time.UTC))
	agg, err := metrics.New(metrics.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := newRedisAlerting(c, cfg, slog.New(slog.DiscardHandler), clock)
	r.observers(agg)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	busBeat := func() time.Time {
		beats, err := redisstore.Heartbeats(context.Background(), c, prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range beats {
			if b.Component == "bus" {
				return b.At
			}
		}
		return time.Time{}
	}
	if at := busBeat(); !at.Equal(clock.Now()) {
		t.Fatalf("the first beat is stamped %v, want the server's clock %v", at, clock.Now())
	}
	clock.Advance(cfg.Alert.Heartbeat.D())
	eventually(t, 0, "a beat once the server's clock moved an interval", func() bool { return busBeat().Equal(clock.Now()) })
}
