package stream

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
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

// handedAlerts is an alert source that never drops the hub: its channel
// is unbuffered, so a send returns once the hub has taken the change.
type handedAlerts struct{ ch chan apollo.Alert }

func (s handedAlerts) SubscribeAlerts() (<-chan apollo.Alert, func()) { return s.ch, func() {} }

// TestAlertStormClosesNoClient: an alert storm (a BY: name rule over
// hundreds of failing jobs fires an alert each at once) puts more alert
// messages in a client's queue than its limit while its writer is busy.
// The client is not closed as too slow: its queued alert messages are
// replaced by one alerts_lost, after which it reads the alerts again, and
// the changes after it come as before. Tenant b, with few alerts, gets
// each of them and no alerts_lost. Before, a storm closed every
// dashboard's stream ("too slow: resubscribe with a cursor"), and the
// hub's own alerts_lost never reached them.
func TestAlertStormClosesNoClient(t *testing.T) {
	t.Parallel()
	src := handedAlerts{ch: make(chan apollo.Alert)}
	var gate writerGate
	killed := make(chan string, 4)
	e := newStreamEnv(t, func(o *Options) {
		o.HeartbeatInterval = -1
		o.Alerts = src
		o.testKilled = func(reason string) { killed <- reason }
		gate.install(t, o)
	})
	a, b := e.dial("view-a"), e.dial("view-b")
	for _, c := range []*wsClient{a, b} {
		c.subscribeQuiet(sub{"type": "subscribe", "filter": map[string]any{"types": []string{"alert"}}})
	}

	const storm = 300 // past the queue's limit of 256 messages
	gate.hold()
	for i := range storm {
		src.ch <- apollo.Alert{ID: fmt.Sprintf("a-%d", i), Tenant: "a", Rule: "r", Group: fmt.Sprint(i), State: apollo.AlertFiring}
	}
	for i := range 3 {
		src.ch <- apollo.Alert{ID: fmt.Sprintf("b-%d", i), Tenant: "b", Rule: "r", State: apollo.AlertFiring}
	}
	// The hub has queued the whole storm (it takes a change once it has
	// queued the one before); the writers go on.
	src.ch <- apollo.Alert{ID: "a-after", Tenant: "a", Rule: "r", State: apollo.AlertFiring}
	src.ch <- apollo.Alert{ID: "b-after", Tenant: "b", Rule: "r", State: apollo.AlertFiring}
	gate.release()

	for c, want := range map[*wsClient]struct {
		tenant string
		lost   bool
	}{a: {"a", true}, b: {"b", false}} {
		lost, n := false, 0
		for {
			m, err := c.tryRead(testwait.Timeout(t))
			if err != nil {
				t.Fatalf("tenant %s: after %d alerts (alerts_lost %v): %v", want.tenant, n, lost, err)
			}
			if m.Type == apiclient.MsgAlertsLost {
				lost = true
				continue
			}
			if m.Type != apiclient.MsgAlert {
				t.Fatalf("tenant %s: %+v, want alerts", want.tenant, m)
			}
			var got apollo.Alert
			if err := json.Unmarshal(m.Alert, &got); err != nil || got.Tenant != want.tenant {
				t.Fatalf("tenant %s was sent %s (%v)", want.tenant, m.Alert, err)
			}
			n++
			if got.ID == want.tenant+"-after" {
				break
			}
		}
		if lost != want.lost {
			t.Errorf("tenant %s: alerts_lost %v, want %v (%d alerts)", want.tenant, lost, want.lost, n)
		}
		if !want.lost && n != 4 {
			t.Errorf("tenant %s: %d alerts, want its 3 and the one after", want.tenant, n)
		}
		if want.lost && n > 256 {
			t.Errorf("tenant %s: %d alert messages came through a queue of 256", want.tenant, n)
		}
	}
	select {
	case r := <-killed:
		t.Fatalf("a client was closed: %s", r)
	default:
	}
	if s := e.hub.Stats(); s.ClosedSlow != 0 || s.AlertsCut == 0 {
		t.Errorf("stats: closedSlow %d want none closed", s.ClosedSlow)
	}
}
