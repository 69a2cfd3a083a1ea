package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// Two alert processes send to one DingTalk robot, each what its dedup
// lock gave it: a robot counts every message it gets, and mutes itself
// for ten minutes past 20 a minute, so the two keep one pace between
// them, not 20 a minute each. Each tenant's notification goes out, the
// second a turn (3 s) after the first.
func TestTwoProcessesKeepOneRobotsPace(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	clk := apollo.NewFakeClock(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC))
	got := make(chan time.Time, 10)
	robot := notify.NotifierFunc(func(context.Context, *notify.Message) (bool, error) {
		got <- clk.Now()
		return false, nil
	})
	var ds []*notify.Dispatcher
	for range 2 {
		d, err := notify.NewDispatcher([]notify.Channel{{Name: "hook", Notifier: robot, RatePerMinute: 20, Tenants: []string{notify.AllTenants}}},
			notify.Options{Clock: clk, Logger: quiet, Location: time.UTC, Tenants: true, Turns: NewTurns(c, prefix)})
		if err != nil {
			t.Fatal(err)
		}
		start(t, d)
		t.Cleanup(func() { d.Stop(context.Background()) })
		ds = append(ds, d)
	}
	ds[0].Send(owedNote("acme", "a1"))
	first := <-got
	ds[1].Send(owedNote("globex", "g1"))
	// The second process waits for its turn on the clock.
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		select {
		case at := <-got:
			t.Fatalf("the second process sent at %s, %s after the first: two messages within a turn of the robot's 20 a minute", at, at.Sub(first))
		default:
			t.Fatal("the second process neither sent nor waited")
		}
	}
	select {
	case at := <-got:
		t.Fatalf("the second process sent at %s, %s after the first", at, at.Sub(first))
	default:
	}
	clk.Advance(3 * time.Second)
	select {
	case at := <-got:
		if at.Sub(first) < 3*time.Second {
			t.Fatalf("sent %s after the first", at.Sub(first))
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the second process never sent")
	}
}
