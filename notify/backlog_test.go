package notify

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A channel without a rate limit that was down while two tenants'
// notifications piled up in its queue comes back: the one it was
// retrying goes out, then what waited meanwhile. A channel people read
// gets it as one digest that says it waited for the channel and how many
// it holds, each tenant's in it, in turn, none twice; a webhook, read by a
// machine, gets every notification as its own message, in the order of
// its tenant's queue.
func TestBacklogAfterAnOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  string
		fold bool
	}{
		{TypeEmail, true}, {TypeSlack, true}, {TypeDingTalk, true}, {TypeWeCom, true}, {TypeFeishu, true},
		{TypeWebhook, false}, {TypeConsole, false}, {"", false},
	} {
		t.Run(cmp.Or(tc.typ, "untyped"), func(t *testing.T) {
			t.Parallel()
			const piled = 30 // past a digest's 20 shown
			clk := apollo.NewFakeClock(t0)
			log := newWatchLog()
			s := newSink(clk)
			var down atomic.Bool
			down.Store(true)
			ch := NotifierFunc(func(ctx context.Context, m *Message) (bool, error) {
				if down.Load() {
					return true, errors.New("421 service not available")
				}
				return s.Notify(ctx, m)
			})
			d, err := NewDispatcher([]Channel{{Name: "out", Type: tc.typ, Notifier: ch, Tenants: []string{AllTenants}}},
				Options{Clock: clk, Log: log, Location: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			d.randN = func(n int64) int64 { return n - 1 }
			if err := d.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer d.Stop(context.Background())

			tenantOf := func(i int) string { return tenants2[i%2] }
			send := func(i int) {
				n := note("a"+strconv.Itoa(i), "k"+strconv.Itoa(i), "out")
				n.Alert.Tenant = tenantOf(i)
				d.Send(n)
			}
			send(0)
			if a := log.next(t); a.Outcome != OutcomeRetrying {
				t.Fatalf("first try: %s %s", a.Outcome, a.Error)
			}
			for i := 1; i <= piled; i++ {
				send(i)
			}
			down.Store(false)
			if !clk.BlockUntil(1, testwait.Timeout(t)) {
				t.Fatal("no backoff timer armed")
			}
			clk.Advance(time.Second)
			if r := s.next(t); r.m.Notification.Alert.ID != "a0" {
				t.Fatalf("first message %q, want the one retried (a0)", r.m.Title)
			}
			if !tc.fold {
				for i := 1; i <= piled; i++ {
					if r := s.next(t); len(r.m.Digest) != 0 || r.m.Notification.Alert.ID != "a"+strconv.Itoa(i) {
						t.Fatalf("message %d: %q, want a%d alone", i, r.m.Title, i)
					}
				}
				return
			}
			r := s.next(t)
			if len(r.m.Digest) != piled || r.m.Title != strconv.Itoa(piled)+" notifications" {
				t.Fatalf("after the outage: %q with %d notifications, want one digest of the %d that waited", r.m.Title, len(r.m.Digest), piled)
			}
			// A mail lists every one; the others list 20 and count the rest.
			listed, more := 20, "… and 10 more"
			if tc.typ == TypeEmail {
				listed, more = piled, ""
			}
			if !strings.Contains(r.m.Text, "while the channel was down") || !strings.Contains(r.m.Text, more) ||
				strings.Count(r.m.Text, "\n- ") != listed {
				t.Errorf("the digest does not say why it folds, or does not list %d and count the rest:\n%s", listed, r.m.Text)
			}
			for i, m := range r.m.Digest {
				if id, want := m.Notification.Alert.ID, "a"+strconv.Itoa(i+1); id != want || m.Notification.Alert.Tenant != tenantOf(i+1) {
					t.Fatalf("digest item %d: %s of %q, want %s of %s", i, id, m.Notification.Alert.Tenant, want, tenantOf(i+1))
				}
			}
			// Back to one message each once the backlog is out.
			send(piled + 1)
			if r := s.next(t); len(r.m.Digest) != 0 {
				t.Fatalf("after the backlog: %q, want one message", r.m.Title)
			}
			d.Stop(context.Background())
			for _, tenant := range tenants2 {
				var as []Attempt
				for _, a := range d.Attempts(AttemptFilter{Tenant: tenant}) {
					if a.Kind == KindDigest {
						as = append(as, a)
					}
				}
				if len(as) != 1 || as[0].Outcome != OutcomeSent || as[0].DedupKey != DigestBacklog {
					t.Fatalf("%s's record of the digest: %+v", tenant, as)
				}
			}
		})
	}
}

var tenants2 = []string{"team-a", "team-b"}

// What a process that stopped owed is a backlog too: after the restart, a
// channel people read gets it as one digest though this process never saw
// the channel fail; a webhook gets each on its own. Two tenants' owed
// notifications are in the outbox when the dispatcher starts.
func TestOwedAfterARestartIsABacklog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  string
		fold bool
	}{{TypeEmail, true}, {TypeSlack, true}, {TypeWebhook, false}, {TypeConsole, false}} {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			const owed = 6
			path := t.TempDir() + "/outbox.jsonl"
			ob := openOutbox(t, path)
			for i := range owed {
				n := note("a"+strconv.Itoa(i), "k"+strconv.Itoa(i), "out")
				n.Alert.Tenant = tenants2[i%2]
				if _, err := ob.Owe("out", t0, n); err != nil {
					t.Fatal(err)
				}
			}
			ob.Close()
			ob = openOutbox(t, path) // the next process
			clk := apollo.NewFakeClock(t0.Add(time.Minute))
			s := newSink(clk)
			d, err := NewDispatcher([]Channel{{Name: "out", Type: tc.typ, Notifier: s, Tenants: []string{AllTenants}}},
				Options{Clock: clk, Log: newWatchLog(), Location: time.UTC, Outbox: ob})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer d.Stop(context.Background())
			if !tc.fold {
				for i := range owed {
					if r := s.next(t); len(r.m.Digest) != 0 || r.m.Notification.Alert.ID != "a"+strconv.Itoa(i) {
						t.Fatalf("message %d: %q, want a%d alone", i, r.m.Title, i)
					}
				}
				return
			}
			r := s.next(t)
			if len(r.m.Digest) != owed || r.m.Notification.DedupKey != DigestBacklog || !strings.Contains(r.m.Text, "Apollo-11 was stopped") {
				t.Fatalf("after the restart: %q with %d notifications, want one backlog digest of the %d owed:\n%s", r.m.Title, len(r.m.Digest), owed, r.m.Text)
			}
			for i, m := range r.m.Digest {
				if id, want := m.Notification.Alert.ID, "a"+strconv.Itoa(i); id != want {
					t.Fatalf("digest item %d: %s, want %s", i, id, want)
				}
			}
		})
	}
}

// A backlog longer than the first round of rendering a digest is folded
// whole on a channel people read.
func TestBacklogDigestHoldsEveryOneWaiting(t *testing.T) {
	t.Parallel()
	const owed = 150
	path := t.TempDir() + "/outbox.jsonl"
	ob := openOutbox(t, path)
	for i := range owed {
		n := note("a"+strconv.Itoa(i), "k"+strconv.Itoa(i), "out")
		n.Alert.Tenant = tenants2[i%2]
		if _, err := ob.Owe("out", t0, n); err != nil {
			t.Fatal(err)
		}
	}
	ob.Close()
	ob = openOutbox(t, path)
	clk := apollo.NewFakeClock(t0.Add(time.Minute))
	s := newSink(clk)
	d, err := NewDispatcher([]Channel{{Name: "out", Type: TypeEmail, Notifier: s, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: newWatchLog(), Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	if r := s.next(t); len(r.m.Digest) != owed {
		t.Fatalf("a digest of %d, want all %d", len(r.m.Digest), owed)
	}
}
