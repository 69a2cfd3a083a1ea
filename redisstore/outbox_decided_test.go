package redisstore

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// What a process recorded as decided (Decisions) and did not forget is
// taken over by a live process once the recorder died, with the owners
// it passed through; the lock a dead owner took for it is taken from that
// owner (AcquireFrom), a live process's lock is not, and a second death
// keeps both owners. An owner leaves the owners' set once both its hashes
// are empty; a process started later finds what is left (TakenOver).
func TestDecisionsTakenOverWithTheirLocks(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	lockerOf := func(o *Outbox) *Locker { return NewLocker(c, prefix+":").WithOwner(o.opts.ID) }
	record := func(o *Outbox, tenant, id string) uint64 {
		t.Helper()
		n, err := o.Decisions().Record(owedNote(tenant, id))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	lock := func(l *Locker, key string, want bool, from ...string) {
		t.Helper()
		ok, err := l.AcquireFrom(ctx, key, time.Minute, from)
		if err != nil || ok != want {
			t.Fatalf("%s AcquireFrom(%q, %v) = %v, %v; want %v", l.token, key, from, ok, err, want)
		}
	}
	ids := func(ts []alert.TakenOver) (out []string) {
		for _, t := range ts {
			out = append(out, t.Notification.Alert.Tenant+"/"+t.Notification.Alert.ID)
		}
		return out
	}
	// The adopters do not renew: only the calls below take anything over.
	a, b, live := newOutbox(t, c, prefix, nil), newOutbox(t, c, prefix, nil), newOutbox(t, c, prefix, nil)
	b.halt()
	live.halt()
	la, lb, llive := lockerOf(a), lockerOf(b), lockerOf(live)

	record(a, "acme", "a1")   // a takes its lock, then dies
	record(a, "globex", "g1") // the live process takes its lock
	if err := a.Decisions().Forget(record(a, "acme", "sent")); err != nil {
		t.Fatal(err)
	}
	mustOwe(t, a, "acme", "queued") // the lanes' own entry
	lock(la, "acme:a1", true)
	lock(llive, "globex:g1", true)
	if _, taken := b.adopt(ctx); len(taken) != 0 {
		t.Fatalf("taken over from a live process: %v", ids(taken))
	}
	crash(t, a)

	owed, taken := b.adopt(ctx)
	if got := ids(taken); !slices.Equal(got, []string{"acme/a1", "globex/g1"}) || alertIDs(owed) != "acme/queued" {
		t.Fatalf("b took over %v and %s; want acme/a1 and globex/g1 decided, acme/queued owed", got, alertIDs(owed))
	}
	for _, tk := range taken {
		if !slices.Equal(tk.From, []string{a.opts.ID}) {
			t.Fatalf("%s taken over from %v, want [%s]", tk.Notification.Alert.ID, tk.From, a.opts.ID)
		}
	}
	if ok, _ := c.SIsMember(ctx, b.owners, a.opts.ID).Result(); ok {
		t.Fatal("the dead owner is still in the owners' set")
	}
	lock(lb, "acme:a1", true, taken[0].From...)    // a's lock, for this very notification
	lock(lb, "globex:g1", false, taken[1].From...) // the live process tells it
	if err := b.Decisions().Forget(taken[1].ID); err != nil {
		t.Fatal(err)
	}
	lock(llive, "acme:a1", false, a.opts.ID) // b holds it now
	crash(t, b)                              // before its lanes had acme/a1

	later := newOutbox(t, c, prefix, nil)
	got := later.TakenOver()
	if !slices.Equal(ids(got), []string{"acme/a1"}) || !slices.Equal(got[0].From, []string{b.opts.ID, a.opts.ID}) {
		t.Fatalf("taken over at start: %v from %v; want acme/a1 from [%s %s]", ids(got), got[0].From, b.opts.ID, a.opts.ID)
	}
	lock(lockerOf(later), "acme:a1", true, got[0].From...)
	if n, _ := c.HLen(ctx, later.decided).Result(); n != 1 {
		t.Fatalf("the taker's decided hash holds %d entries, want 1 until it forgets it", n)
	}
}

// Sending what was taken over can take long (a lock and an outbox entry
// per notification, each a Redis call, on a Redis that answers slowly):
// it runs beside the renewals, never in their way. While one takeover is
// being sent the lease is still renewed at every round, and the next
// round takes nothing more over from the engine's side.
func TestRenewalsGoOnWhileATakeoverIsSent(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	a := newOutbox(t, c, prefix, nil)
	for _, n := range []apollo.Notification{owedNote("acme", "a1"), owedNote("globex", "g1")} {
		if _, err := a.Decisions().Record(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Stop(ctx); err != nil { // its lease goes at once
		t.Fatal(err)
	}
	clock := apollo.NewFakeClock(time.Now())
	b, err := NewOutbox(OutboxOptions{Client: c, Prefix: prefix, ID: "b", Logger: quiet, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	sending, done := make(chan []alert.TakenOver, 2), make(chan struct{})
	b.OnTakeOver(func(ts []alert.TakenOver) {
		sending <- ts
		<-done // a slow send
	})
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)
	var sent sync.Once // the send ends before Stop waits for it, whatever fails
	defer sent.Do(func() { close(done) })
	if got := b.TakenOver(); len(got) != 2 { // at Start, from the engine's start
		t.Fatalf("taken over at start: %d, want 2", len(got))
	}
	// A second process dies with a decision of its own after b started.
	d := newOutbox(t, c, prefix, nil)
	if _, err := d.Decisions().Record(owedNote("acme", "d1")); err != nil {
		t.Fatal(err)
	}
	crash(t, d)
	clock.BlockUntil(1, time.Minute)
	clock.Advance(DefaultOutboxLease / 3)
	select {
	case ts := <-sending:
		if len(ts) != 1 || ts[0].Notification.Alert.ID != "d1" {
			t.Fatalf("taken over at the renewal: %+v, want d1", ts)
		}
	case <-time.After(time.Minute):
		t.Fatal("the dead process's decision was not taken over at the renewal")
	}
	// While d1 is being sent: another death, and two more rounds. The
	// lease (deleted here, as if it had run out) comes back at each.
	e := newOutbox(t, c, prefix, nil)
	if _, err := e.Decisions().Record(owedNote("globex", "e1")); err != nil {
		t.Fatal(err)
	}
	crash(t, e)
	for round := range 2 {
		if err := c.Del(ctx, b.alive).Err(); err != nil {
			t.Fatal(err)
		}
		clock.BlockUntil(1, time.Minute)
		clock.Advance(DefaultOutboxLease / 3)
		deadline := time.Now().Add(time.Minute)
		for n, _ := c.Exists(ctx, b.alive).Result(); n == 0; n, _ = c.Exists(ctx, b.alive).Result() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d while a takeover was being sent: the lease was not renewed", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	select {
	case ts := <-sending:
		t.Fatalf("a second takeover began before the first was sent: %+v", ts)
	default:
	}
	if n, _ := c.HLen(ctx, b.keyDecided(e.opts.ID)).Result(); n != 1 {
		t.Fatalf("e's decision was taken while d1 was being sent: e's hash holds %d, want 1", n)
	}
	sent.Do(func() { close(done) })
	// The send ends on its own goroutine: the round after it takes e1.
	deadline := time.Now().Add(time.Minute)
	for b.taking.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the takeover's send did not end once let go")
		}
		time.Sleep(time.Millisecond) // polling a state with a deadline
	}
	clock.BlockUntil(1, time.Minute)
	clock.Advance(DefaultOutboxLease / 3)
	select {
	case ts := <-sending:
		if len(ts) != 1 || ts[0].Notification.Alert.ID != "e1" {
			t.Fatalf("taken over after the first was sent: %+v, want e1", ts)
		}
	case <-time.After(time.Minute):
		t.Fatal("e's decision was not taken over once d1 was sent")
	}
}
