package alert_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/alert/alerttest"
	"github.com/apollo-11/apollo/internal/testwait"
)

// gateSender holds the first notification it is handed until release is
// closed: a dispatcher that has not taken it yet.
type gateSender struct {
	entered chan apollo.Notification
	release chan struct{}
}

func (g *gateSender) Send(n apollo.Notification) {
	select {
	case g.entered <- n:
		<-g.release
	default:
		// The first one is held; the test never hands over another.
	}
}

// A state saved while notifications were decided (their alerts marked
// told) but not yet with the Sender lists them as owed; an engine started
// on that state sends them, once per tenant, and then no more. The one
// whose dedup lock the first engine held goes out without asking again;
// the other asks. Before, the state said "told" and nothing was sent.
func TestOwedNotificationsAreSentAfterARestart(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	state := alert.NewMemoryState()
	locker := alert.NewMemoryLocker(clock) // as Redis: outlives an engine
	store := newTable()
	store.set("batch_load", failing(9, 10))
	rule := parse(t, `RULE batch_failed task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed_rate > 0.5 NOTIFY: hook`)
	tenants := []string{"team-a", "team-b"}
	engine := func(s alert.Sender) *alert.Engine {
		e, err := alert.New(alert.Options{Store: store, Sender: s, Locker: locker, State: state, Clock: clock, Logger: quiet,
			DedupWindow: time.Hour, RepeatInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, tenant := range tenants {
			e.SetRules(tenant, rule)
		}
		return e
	}

	gate := &gateSender{entered: make(chan apollo.Notification, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(gate.release) })
	first := engine(gate)
	evaluated := make(chan error, 1)
	go func() { evaluated <- first.Evaluate(bg, clock.Now()) }()
	select {
	case <-gate.entered: // both alerts fire; one is in the Sender, one waits
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no notification reached the Sender")
	}
	if err := first.Save(bg); err != nil {
		t.Fatal(err)
	}
	// The first engine is gone here, as in a kill -9: it never hands over.

	sink := alerttest.NewSink(10)
	second := engine(sink)
	if err := second.Start(bg); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < len(tenants) {
		select {
		case n := <-sink.C:
			if n.Kind != apollo.NotifyFiring || n.Alert.Rule != "batch_failed" {
				t.Fatalf("sent %s of %s", n.Kind, n.Alert.Rule)
			}
			got = append(got, n.Alert.Tenant)
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("after the restart the engine sent firing notifications of %v, want %v", got, tenants)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, tenants) {
		t.Fatalf("sent firing notifications of %v, want %v", got, tenants)
	}
	clock.Advance(10 * time.Second)
	if err := second.Evaluate(bg, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := second.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, _ := state.Load(bg); len(s.Owed) != 0 {
		t.Fatalf("a state saved after the hand-over still owes %+v", s.Owed)
	}

	third := engine(sink)
	if err := third.Start(bg); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if err := third.Evaluate(bg, clock.Now()); err != nil {
		t.Fatal(err)
	}
	third.Stop(context.Background())
	if n := len(sink.Notes()); n != len(tenants) {
		t.Fatalf("%d notifications in all, want %d: %+v", n, len(tenants), sink.Notes())
	}
}
