package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/outboxtest"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// newOutbox makes and starts the outbox of a process with a new ID on
// prefix; it is stopped when the test ends, unless the test ended it.
func newOutbox(t *testing.T, c redis.UniversalClient, prefix string, change func(*OutboxOptions)) *Outbox {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	opts := OutboxOptions{Client: c, Prefix: prefix, ID: "p-" + hex.EncodeToString(b[:]), Logger: quiet}
	if change != nil {
		change(&opts)
	}
	o, err := NewOutbox(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Stop(context.Background()) })
	return o
}

// newCutClient is a client of Redis through p, quick to give up.
func newCutClient(t *testing.T, p *redistest.Proxy, db int) *redis.Client {
	cut := redis.NewClient(&redis.Options{Addr: p.Addr(), DB: db, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { cut.Close() })
	return cut
}

// crash ends o as kill -9 does, and lets its lease run out.
func crash(t *testing.T, o *Outbox) {
	t.Helper()
	o.halt()
	if err := o.opts.Client.Del(context.Background(), o.alive).Err(); err != nil {
		t.Fatal(err)
	}
}

// The Redis outbox passes the suite the file outbox passes: each case on
// a prefix of its own, each Open a process with a new ID.
func TestOutboxConformance(t *testing.T) {
	t.Parallel()
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		c, prefix := redistest.Client(t)
		return outboxtest.Harness{
			Open: func(t *testing.T) notify.Outbox { return newOutbox(t, c, prefix, nil) },
			Stop: func(t *testing.T, o notify.Outbox) {
				if err := o.(*Outbox).Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
			Crash: func(t *testing.T, o notify.Outbox) { crash(t, o.(*Outbox)) },
		}
	})
}

func owedNote(tenant, id string) apollo.Notification {
	return apollo.Notification{Kind: apollo.NotifyFiring, Channels: []string{"hook"}, DedupKey: id,
		Alert: apollo.Alert{ID: id, Tenant: tenant, Rule: id, State: apollo.AlertFiring}}
}

func mustOwe(t *testing.T, o *Outbox, tenant, id string) uint64 {
	t.Helper()
	n, err := o.Owe("hook", time.Now(), owedNote(tenant, id))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func alertIDs(es []notify.OwedNotification) string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.Notification.Alert.Tenant+"/"+e.Notification.Alert.ID)
	}
	return strings.Join(ids, ",")
}

// Two live processes never take each other's entries; once one dies,
// exactly one of the live ones takes them over, when its lease has run
// out, and hands them to its dispatcher (OnAdopt).
func TestOutboxOwnership(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	a := newOutbox(t, c, prefix, nil)
	mustOwe(t, a, "acme", "a1")
	mustOwe(t, a, "globex", "g1")
	b := newOutbox(t, c, prefix, nil)
	d := newOutbox(t, c, prefix, nil)
	if got := b.Owed(); len(got) != 0 {
		t.Fatalf("a process took what a live one owes at its start: %s", alertIDs(got))
	}
	if got, _ := b.adopt(ctx); len(got) != 0 {
		t.Fatalf("a process took what a live one owes: %s", alertIDs(got))
	}

	// a dies; its lease runs out by itself (a short one, so that the
	// test waits for Redis's expiry rather than a fake clock it cannot
	// move).
	a2 := newOutbox(t, c, prefix, func(o *OutboxOptions) { o.Lease = 300 * time.Millisecond })
	mustOwe(t, a2, "acme", "a2")
	a.halt()
	c.Del(ctx, a.alive)
	a2.halt()
	var mu sync.Mutex
	var taken []notify.OwedNotification
	deadline := time.Now().Add(time.Minute)
	for len(taken) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, taken over: %s", alertIDs(taken))
		}
		var wg sync.WaitGroup
		for _, o := range []*Outbox{b, d} {
			wg.Go(func() {
				got, _ := o.adopt(ctx)
				mu.Lock()
				taken = append(taken, got...)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if got := alertIDs(taken); len(taken) != 3 || !strings.Contains(got, "acme/a1") || !strings.Contains(got, "globex/g1") || !strings.Contains(got, "acme/a2") {
		t.Fatalf("taken over: %s, want acme/a1, globex/g1 and acme/a2 once each", got)
	}
	if n, _ := c.Exists(ctx, a.owed, a2.owed).Result(); n != 0 {
		t.Fatalf("%d dead processes' hashes left", n)
	}
	if m, _ := c.SMembers(ctx, b.owners).Result(); len(m) != 2 {
		t.Fatalf("owners after the takeover: %v, want the two live processes", m)
	}
}

// A process that stops cleanly gives its lease up: another takes over
// what it still owed at its next renewal, without waiting for the lease
// to run out, and hands it to OnAdopt.
func TestOutboxStopHandsOver(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	clock := apollo.NewFakeClock(time.Now())
	a := newOutbox(t, c, prefix, nil)
	adopted := make(chan []notify.OwedNotification, 1)
	b, err := NewOutbox(OutboxOptions{Client: c, Prefix: prefix, ID: "b", Logger: quiet, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	b.OnAdopt(func(es []notify.OwedNotification) { adopted <- es })
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(context.Background())
	mustOwe(t, a, "acme", "a1")
	mustOwe(t, a, "globex", "g1")
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.BlockUntil(1, time.Minute)
	clock.Advance(DefaultOutboxLease / 3)
	select {
	case es := <-adopted:
		if alertIDs(es) != "acme/a1,globex/g1" {
			t.Fatalf("handed over: %s", alertIDs(es))
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing handed over at the renewal after the other process stopped")
	}
}

// An outbox bounds what it holds: past MaxEntries, or for an entry over
// MaxEntryBytes, Owe says so and records nothing.
func TestOutboxBounds(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	o := newOutbox(t, c, prefix, func(o *OutboxOptions) { o.MaxEntries, o.MaxEntryBytes = 2, 4096 })
	mustOwe(t, o, "acme", "a1")
	id := mustOwe(t, o, "globex", "g1")
	if _, err := o.Owe("hook", time.Now(), owedNote("acme", "a2")); err == nil || !strings.Contains(err.Error(), "full (2 entries") {
		t.Fatalf("a third entry past max entries 2: %v", err)
	}
	if err := o.Settle(id); err != nil {
		t.Fatal(err)
	}
	big := owedNote("globex", "big")
	big.Alert.Summary = strings.Repeat("\u202e", 4096)
	if _, err := o.Owe("hook", time.Now(), big); err == nil || !strings.Contains(err.Error(), "over the 4096 an entry may hold") {
		t.Fatalf("an entry past max entry bytes: %v", err)
	}
	mustOwe(t, o, "acme", "a3")
	if s := o.Stats(); s.Owed != 2 || s.Failures != 2 {
		t.Fatalf("stats %+v, want 2 owed and 2 failures", s)
	}
	crash(t, o)
	if got := alertIDs(newOutbox(t, c, prefix, nil).Owed()); got != "acme/a1,acme/a3" {
		t.Fatalf("owed after the crash: %s", got)
	}
}

// What the owners' set holds is data: a member that is not an ID this
// package writes is never used as part of a key, and an entry of a dead
// process that does not read is dropped, not taken over again at every
// round; the ones that read are taken over.
func TestOutboxHostileData(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	a := newOutbox(t, c, prefix, nil)
	mustOwe(t, a, "acme", "good")
	if _, err := a.Decisions().Record(owedNote("acme", "decided")); err != nil {
		t.Fatal(err)
	}
	crash(t, a)
	c.HSet(ctx, a.owed, "999", "not json\r\n")
	c.HSet(ctx, a.decided, "998", "no newline")
	c.HSet(ctx, a.decided, "999", "x \nnot json")
	bad := []string{"", "../x", "a:b", "x}{outbox}", "a\r\nb", strings.Repeat("z", 200)}
	for _, m := range bad {
		c.SAdd(ctx, a.owners, m)
		c.HSet(ctx, a.keyOwed(m), "1", `{"id":1,"channel":"hook","n":{"alert":{"id":"forged"}}}`)
	}
	b := newOutbox(t, c, prefix, nil)
	if got := alertIDs(b.Owed()); got != "acme/good" {
		t.Fatalf("taken over: %s, want acme/good alone", got)
	}
	if got, _ := b.adopt(ctx); len(got) != 0 {
		t.Fatalf("taken over again: %s", alertIDs(got))
	}
	if n, _ := c.HLen(ctx, b.owed).Result(); n != 1 {
		t.Fatalf("%d entries in the new owner's hash, want 1 (the bad one dropped)", n)
	}
	if got := b.TakenOver(); len(got) != 1 || got[0].Notification.Alert.ID != "decided" {
		t.Fatalf("decided entries taken over: %+v, want acme/decided alone", got)
	}
	if n, _ := c.HLen(ctx, b.decided).Result(); n != 1 {
		t.Fatalf("%d entries in the new owner's decided hash, want 1 (the bad ones dropped)", n)
	}
}

// A dead process of a newer release (or damage) leaves thousands of
// entries that do not read, owed and decided, beside good ones of two
// tenants: the process that takes over drops every bad one, counts each
// (outbox.unreadable in its heartbeat), logs one line of each kind with
// why rather than one per entry, and takes over the good ones. Before,
// each was logged, a line per entry, and none was counted.
func TestOutboxUnreadableEntriesAreCounted(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	a := newOutbox(t, c, prefix, nil)
	mustOwe(t, a, "acme", "good")
	if _, err := a.Decisions().Record(owedNote("globex", "decided")); err != nil {
		t.Fatal(err)
	}
	crash(t, a)
	const bad = 2000
	fields := make([]any, 0, 2*bad)
	for i := range bad {
		fields = append(fields, 1000+i, "\x00{\"id\":\"newer\"}\x1b[2J")
	}
	c.HSet(ctx, a.owed, fields...)
	c.HSet(ctx, a.decided, "998", "no newline", "999", "x \nnot json")
	var logs LockedLog
	b := newOutbox(t, c, prefix, func(o *OutboxOptions) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.Clock = apollo.NewFakeClock(time.Now())
	})
	if got := alertIDs(b.Owed()); got != "acme/good" {
		t.Fatalf("taken over: %s, want acme/good alone", got)
	}
	if got := b.TakenOver(); len(got) != 1 || got[0].Notification.Alert.Tenant != "globex" {
		t.Fatalf("decided entries taken over: %+v, want globex/decided alone", got)
	}
	// A round takes adoptBatch of a hash: the next renewals the rest.
	for round := 1; c.Exists(ctx, a.owed).Val() == 1; round++ {
		if round > bad/adoptBatch {
			t.Fatalf("the dead process's entries are still there after %d more rounds", round-1)
		}
		if got, _ := b.adopt(ctx); len(got) != 0 {
			t.Fatalf("taken over in a later round: %s, want nothing", alertIDs(got))
		}
	}
	if n, _ := c.HLen(ctx, b.owed).Result(); n != 1 {
		t.Fatalf("%d entries in the new owner's hash, want 1 (the bad ones dropped)", n)
	}
	if n := b.Stats().Unreadable; n != bad+2 {
		t.Fatalf("%d entries counted as unreadable, want %d", n, bad+2)
	}
	out := logs.String()
	if strings.Count(out, "level=ERROR") != 2 || !strings.Contains(out, "an entry (owed) of a stopped alert process does not read") ||
		!strings.Contains(out, "an entry (decided) of a stopped alert process does not read") || !strings.Contains(out, "outbox.unreadable") {
		t.Fatalf("the log says:\n%s\nwant one line for the owed entries and one for the decided, saying where all are counted", out)
	}
}

// Redis that does not answer: Owe and Settle fail (the dispatcher then
// sends without the record, and counts), at once after the first, and
// the settles wait; once Redis answers, the next renewal settles them,
// so that a crash afterwards leaves only what is still owed.
func TestOutboxRedisDown(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	p := redistest.NewProxy(t, c.Options().Addr)
	cut := newCutClient(t, p, c.Options().DB)
	clock := apollo.NewFakeClock(time.Now())
	o := newOutbox(t, cut, prefix, func(o *OutboxOptions) { o.Clock = clock })
	kept := mustOwe(t, o, "acme", "kept")
	done := mustOwe(t, o, "globex", "done")

	p.SetBroken(true)
	if err := o.Settle(done); err == nil {
		t.Fatal("Settle succeeded with Redis cut off")
	}
	for _, tenant := range []string{"acme", "globex"} {
		if _, err := o.Owe("hook", time.Now(), owedNote(tenant, "lost")); !errors.Is(err, errOutboxDown) {
			t.Fatalf("Owe with Redis cut off: %v, want the outbox down at once", err)
		}
	}
	if s := o.Stats(); !s.Down || s.Unsettled != 1 || s.Failures != 3 {
		t.Fatalf("stats while Redis is cut off: %+v", s)
	}
	p.SetBroken(false)
	clock.BlockUntil(1, time.Minute)
	clock.Advance(DefaultOutboxLease / 3)
	deadline := time.Now().Add(time.Minute)
	for s := o.Stats(); s.Down || s.Unsettled > 0; s = o.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats a minute after Redis answers again: %+v", s)
		}
		clock.BlockUntil(1, time.Minute)
		clock.Advance(DefaultOutboxLease / 3)
	}
	mustOwe(t, o, "globex", "after")
	crash(t, o)
	if got := alertIDs(newOutbox(t, c, prefix, nil).Owed()); got != "acme/kept,globex/after" {
		t.Fatalf("owed after the outage and a crash: %s (entry %d kept)", got, kept)
	}
}

// Redis that comes back empty loses what a live process owes; Refill
// (the Keeper calls it) writes it back, so a crash afterwards still
// leaves it to the next process.
func TestOutboxRefill(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	o := newOutbox(t, c, prefix, nil)
	mustOwe(t, o, "acme", "a1")
	o.Settle(mustOwe(t, o, "globex", "sent"))
	mustOwe(t, o, "globex", "g1")
	if err := redistest.Delete(ctx, c, prefix); err != nil {
		t.Fatal(err)
	}
	if err := o.Refill(ctx); err != nil {
		t.Fatal(err)
	}
	if s := o.Stats(); s.Refills != 1 || s.Owed != 2 {
		t.Fatalf("stats after the refill: %+v", s)
	}
	crash(t, o)
	if got := alertIDs(newOutbox(t, c, prefix, nil).Owed()); got != "acme/a1,globex/g1" {
		t.Fatalf("owed after Redis lost it, the refill and a crash: %s", got)
	}
}
