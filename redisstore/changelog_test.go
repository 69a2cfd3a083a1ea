package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The feed saves the bus's mark with each batch, read before the batch
// was taken, and a follower started from a saved position reads on from
// it: what was written while it was away arrives, once, with its LSN,
// and its mark is the batch's.
func TestChangeLogKeepsTheMarkAndThePosition(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	if _, ok, err := redisstore.FeedMark(ctx, c, prefix); ok || err != nil {
		t.Fatalf("a mark before any feed: ok %v, err %v", ok, err)
	}
	mark := uint64(0)
	feed := redisstore.NewChangeFeed(c, prefix, nil).WithClock(apollo.NewFakeClock(time.Unix(0, 0))).WithMark(func() uint64 { return mark })
	feed.Start(ctx)
	// Saved at the start, even at 0: a restart replays above it.
	if m, ok, _ := redisstore.FeedMark(ctx, c, prefix); !ok || m != 0 {
		t.Fatalf("mark after the start: %d, %v; want 0, saved", m, ok)
	}
	fail := func(lsn uint64, tenant, id string) {
		feed.Apply(&apollo.Change{LSN: lsn, Prev: apollo.Before{Status: apollo.StatusRunning},
			Task: apollo.Task{TaskID: id, Name: "etl", Tenant: tenant, Status: apollo.StatusFailed}})
	}
	fail(1, "acme", "a1")
	mark = 1
	if err := feed.SaveMark(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan *apollo.Change, 10)
	first := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, nil)
	if err := first.Seek(ctx, 0, "0"); err != nil {
		t.Fatal(err)
	}
	first.Start(ctx)
	if ch := next(t, got); ch.LSN != 1 || ch.Task.TaskID != "a1" {
		t.Fatalf("first change %+v", ch)
	}
	eventuallyMark(t, first, 1)
	first.Stop(ctx)
	_, pos := first.Mark()

	fail(2, "globex", "g1")
	fail(3, "acme", "a2")
	mark = 3
	feed.Stop(ctx)
	if m, _, _ := redisstore.FeedMark(ctx, c, prefix); m != 3 {
		t.Fatalf("mark after the stop: %d, want 3", m)
	}
	forgot := make(chan struct{}, 1)
	again := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, func() { forgot <- struct{}{} })
	if err := again.Seek(ctx, 1, pos); err != nil {
		t.Fatal(err)
	}
	again.Start(ctx)
	defer again.Stop(ctx)
	for _, want := range []string{"g1", "a2"} {
		if ch := next(t, got); ch.Task.TaskID != want {
			t.Fatalf("after the restart: %+v, want %s", ch, want)
		}
	}
	eventuallyMark(t, again, 3)
	select {
	case ch := <-got:
		t.Fatalf("a change twice: %+v", ch)
	default:
	}

	// A bus on a new log (its data directory replaced): its LSNs start
	// over, below the saved mark, under a new epoch; the follower forgets
	// what it heard before it applies the new log's changes.
	fresh := redisstore.NewChangeFeed(c, prefix, nil).WithClock(apollo.NewFakeClock(time.Unix(0, 0))).WithMark(func() uint64 { return 1 })
	fresh.Start(ctx)
	fresh.Apply(&apollo.Change{LSN: 1, Prev: apollo.Before{Status: apollo.StatusRunning},
		Task: apollo.Task{TaskID: "n1", Name: "etl", Tenant: "globex", Status: apollo.StatusFailed}})
	fresh.Stop(ctx)
	select {
	case <-forgot:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the follower did not forget the old log's LSNs")
	}
	if ch := next(t, got); ch.Task.TaskID != "n1" || ch.LSN != 1 {
		t.Fatalf("the new log's change: %+v", ch)
	}
	eventuallyMark(t, again, 1)
}

func next(t *testing.T, got chan *apollo.Change) *apollo.Change {
	t.Helper()
	select {
	case ch := <-got:
		return ch
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no change")
		return nil
	}
}

func eventuallyMark(t *testing.T, f *redisstore.ChangeFollower, want uint64) {
	t.Helper()
	deadline := time.Now().Add(testwait.Timeout(t))
	for {
		if m, _ := f.Mark(); m == want {
			return
		}
		if time.Now().After(deadline) {
			m, _ := f.Mark()
			t.Fatalf("follower's mark %d, want %d", m, want)
		}
		time.Sleep(time.Millisecond) // polling a state with a deadline
	}
}
