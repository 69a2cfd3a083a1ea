package stream

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// droppingAlerts is an alert source that drops its subscriber as the
// alert engine does one that falls behind: it closes the channel. Each
// subscribe gets a new channel.
type droppingAlerts struct {
	mu   sync.Mutex
	cur  chan apollo.Alert
	subs chan struct{} // a value per subscribe
}

func (d *droppingAlerts) SubscribeAlerts() (<-chan apollo.Alert, func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cur = make(chan apollo.Alert, 4)
	d.subs <- struct{}{}
	return d.cur, func() {}
}

func (d *droppingAlerts) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.cur)
}

func (d *droppingAlerts) send(a apollo.Alert) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cur <- a
}

// TestAlertsLostInAStormAreReadAgain: when the alert source drops the hub
// (a storm of more changes at once than its buffer), the hub subscribes
// again, tells every client that wants alerts, of each tenant, to read
// them again, and goes on forwarding the changes after it. Before, it
// stopped forwarding for good: a dashboard open through a storm showed
// none of the alerts after it.
func TestAlertsLostInAStormAreReadAgain(t *testing.T) {
	t.Parallel()
	src := &droppingAlerts{subs: make(chan struct{}, 4)}
	e := newStreamEnv(t, func(o *Options) {
		o.HeartbeatInterval = -1
		o.Alerts = src
	})
	<-src.subs
	a, b := e.dial("view-a"), e.dial("view-b")
	a.subscribeQuiet(sub{"type": "subscribe", "filter": map[string]any{"types": []string{"alert"}}})
	b.subscribeQuiet(sub{"type": "subscribe", "filter": map[string]any{"types": []string{"alert"}}})

	src.drop()
	select {
	case <-src.subs:
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not subscribe again after the source dropped it")
	}
	for _, c := range []*wsClient{a, b} {
		if m := c.readType(apiclient.MsgAlertsLost); m.Type != apiclient.MsgAlertsLost {
			t.Fatalf("got %+v", m)
		}
	}
	src.send(apollo.Alert{ID: "after-a", Tenant: "a", Rule: "r", State: apollo.AlertFiring})
	src.send(apollo.Alert{ID: "after-b", Tenant: "b", Rule: "r", State: apollo.AlertFiring})
	for c, want := range map[*wsClient]string{a: "after-a", b: "after-b"} {
		m := c.readType(apiclient.MsgAlert)
		var got apollo.Alert
		if err := json.Unmarshal(m.Alert, &got); err != nil || got.ID != want {
			t.Fatalf("after the drop: %s (%v), want alert %s", m.Alert, err, want)
		}
	}
	if n := e.hub.Stats().AlertsLost; n != 1 {
		t.Errorf("stats alertsLost = %d, want 1", n)
	}
}
