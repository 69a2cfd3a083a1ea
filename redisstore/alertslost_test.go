package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// TestAlertsLostInAStormReachTheBusStream: the alert engine drops a
// subscriber that falls behind by closing its channel. The alert
// process's publisher then subscribes again and says so on <p>:alerts;
// the bus's feed closes its reader's channel (the stream hub then
// subscribes again and has its clients read the alerts again), and the
// changes after it arrive on the next subscription. Before, the
// publisher stopped at the first storm: no alert change reached the
// bus's stream again until the alert process restarted.
func TestAlertsLostInAStormReachTheBusStream(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	subs := make(chan chan apollo.Alert, 4) // each subscription the engine hands out
	stop := redisstore.PublishAlerts(ctx, c, prefix, func() (<-chan apollo.Alert, func()) {
		ch := make(chan apollo.Alert, 4)
		subs <- ch
		return ch, func() {}
	})
	defer stop()
	first := <-subs

	feed := redisstore.NewAlertFeed(ctx, c, prefix)
	got, unsubscribe := feed.SubscribeAlerts()
	defer func() { unsubscribe() }()
	recv := func(ch <-chan apollo.Alert) (apollo.Alert, bool) {
		select {
		case a, ok := <-ch:
			return a, ok
		case <-time.After(10 * time.Second):
			t.Fatal("nothing reached the bus's feed")
			return apollo.Alert{}, false
		}
	}
	first <- apollo.Alert{ID: "before", Tenant: "a", State: apollo.AlertFiring}
	if a, ok := recv(got); !ok || a.ID != "before" {
		t.Fatalf("first change: %+v %v", a, ok)
	}
	close(first) // the engine drops the publisher
	second := <-subs
	if a, ok := recv(got); ok {
		t.Fatalf("after the drop the feed's channel should close, got %+v", a)
	}
	unsubscribe()
	got, unsubscribe = feed.SubscribeAlerts()
	second <- apollo.Alert{ID: "after", Tenant: "b", State: apollo.AlertFiring}
	if a, ok := recv(got); !ok || a.ID != "after" {
		t.Fatalf("after subscribing again: %+v %v", a, ok)
	}
}
