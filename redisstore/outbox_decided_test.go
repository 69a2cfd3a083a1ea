package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

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
