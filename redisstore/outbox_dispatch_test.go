package redisstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// newDispatcher makes a dispatcher of one channel, "hook", shared by
// every tenant, that hands each message to n and records in o.
func newDispatcher(t *testing.T, o notify.Outbox, n notify.NotifierFunc) *notify.Dispatcher {
	t.Helper()
	d, err := notify.NewDispatcher([]notify.Channel{{Name: "hook", Notifier: n, Tenants: []string{notify.AllTenants}}},
		notify.Options{Outbox: o, Logger: quiet, Location: time.UTC, Tenants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d
}

func start(t *testing.T, s interface{ Start(context.Context) error }) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// sink is a notifier that hands "tenant/alert" of each message to a
// channel and answers as fail says.
func sink(c chan string, fail error) notify.NotifierFunc {
	return func(_ context.Context, m *notify.Message) (bool, error) {
		c <- m.Notification.Alert.Tenant + "/" + m.Notification.Alert.ID
		return true, fail
	}
}

func next(t *testing.T, c chan string) string {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(time.Minute):
		t.Fatal("no message within a minute")
		return ""
	}
}

// One alert process owes each tenant's notification while the channel is
// down and dies; another, running all along, takes them over at its next
// renewal, once the dead one's lease is gone, and delivers them; once
// delivered they are owed no more.
func TestOutboxTakenOverByALiveDispatcher(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	refused, sent := make(chan string, 10), make(chan string, 10)
	a := newOutbox(t, c, prefix, nil)
	da := newDispatcher(t, a, sink(refused, errors.New("503 down")))
	start(t, da)

	clock := apollo.NewFakeClock(time.Now())
	b, err := NewOutbox(OutboxOptions{Client: c, Prefix: prefix, ID: "b", Logger: quiet, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	db := newDispatcher(t, b, sink(sent, nil))
	b.OnAdopt(db.Requeue)
	start(t, b)
	t.Cleanup(func() { b.Stop(context.Background()) })
	start(t, db)

	da.Send(owedNote("acme", "a1"))
	da.Send(owedNote("globex", "g1"))
	next(t, refused) // a1 is retried, g1 waits behind it
	da.Stop(context.Background())
	crash(t, a)

	clock.BlockUntil(1, time.Minute)
	clock.Advance(DefaultOutboxLease / 3)
	got := []string{next(t, sent), next(t, sent)}
	slices.Sort(got)
	if strings.Join(got, ",") != "acme/a1,globex/g1" {
		t.Fatalf("delivered after the takeover: %v", got)
	}
	// The lane settles after the notifier returned: no signal to wait on.
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for b.Stats().Owed > 0 || c.HLen(context.Background(), b.owed).Val() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still owed a minute after delivery: %+v", b.Stats())
		}
		<-tick.C
	}
}

// With Redis gone, notifications are still sent: the outbox refuses at
// once, the dispatcher counts it (Stats.OutboxFailures) and sends.
func TestOutboxDownStillSends(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	p := redistest.NewProxy(t, c.Options().Addr)
	cut := newCutClient(t, p, c.Options().DB)
	o := newOutbox(t, cut, prefix, nil)
	sent := make(chan string, 10)
	d := newDispatcher(t, o, sink(sent, nil))
	start(t, d)
	p.SetBroken(true)
	d.Send(owedNote("acme", "a1"))
	d.Send(owedNote("globex", "g1"))
	got := []string{next(t, sent), next(t, sent)}
	slices.Sort(got)
	if strings.Join(got, ",") != "acme/a1,globex/g1" {
		t.Fatalf("delivered with Redis cut off: %v", got)
	}
	if f := d.Stats().OutboxFailures; f < 2 {
		t.Fatalf("outbox failures counted: %d, want at least 2", f)
	}
}
