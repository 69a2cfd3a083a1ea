package redisstore_test

import (
	"context"
	"sync/atomic"
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
// bus's stream again until the alert process restarted. The word comes
// after the engine's state is saved, so that a bus's re-read sees what
// the lost changes made; before, it came first, and a bus read the alerts
// of before the storm (TestTUIReadsAlertsAgainAfterAStorm, three
// processes).
func TestAlertsLostInAStormReachTheBusStream(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	subs := make(chan chan apollo.Alert, 4) // each subscription the engine hands out
	var subscribed atomic.Int32
	saving, saved := make(chan int32, 1), make(chan struct{})
	stop := redisstore.PublishAlerts(ctx, c, prefix, func() (<-chan apollo.Alert, func()) {
		ch := make(chan apollo.Alert, 4)
		subscribed.Add(1)
		subs <- ch
		return ch, func() {}
	}, func(context.Context) error {
		saving <- subscribed.Load()
		<-saved
		return nil
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
	// It saves the engine's state once subscribed again, and says that
	// changes were lost only once that save is done: a bus that reads the
	// alerts again on the word reads what the lost changes made.
	if n := <-saving; n != 2 {
		t.Fatalf("saved with %d subscriptions taken, want the second taken first", n)
	}
	if err := c.Publish(ctx, prefix+":alerts", `{"id":"during the save"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if a, ok := recv(got); !ok || a.ID != "during the save" {
		t.Fatalf("during the save the feed got %+v (open: %v), want no word of loss before it", a, ok)
	}
	close(saved)
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
