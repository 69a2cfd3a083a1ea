package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// down is a Notifier that refuses every message, retryably, and signals
// each try.
type down struct{ tries chan *Message }

func (d down) Notify(_ context.Context, m *Message) (bool, error) {
	d.tries <- m
	return true, errors.New("503 down")
}

func openOutbox(t *testing.T, path string) *FileOutbox {
	t.Helper()
	o, err := OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func tenantNote(id, tenant string) apollo.Notification {
	n := note(id, "k-"+id, "hook")
	n.Alert.Tenant = tenant
	return n
}

// What a lane had not delivered when its process stopped (the one being
// retried, and the one waiting behind it) is sent by the next process on
// the same outbox; what it had delivered is not sent again. Two tenants
// share the channel.
func TestOutboxKeepsWhatWasOwed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	clk := apollo.NewFakeClock(t0)
	tries := make(chan *Message, 10)
	ok := newSink(clk)

	first, err := NewDispatcher([]Channel{{Name: "hook", Notifier: ok, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: newWatchLog(), Location: time.UTC, Outbox: openOutbox(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	first.Start(context.Background())
	first.Send(tenantNote("delivered", "team-a"))
	ok.next(t)
	first.Stop(context.Background())

	// The channel goes down: team-a's alert is retried, team-b's waits.
	ob := openOutbox(t, path)
	if got := ob.Owed(); len(got) != 0 {
		t.Fatalf("a delivered notification is still owed: %+v", got)
	}
	log := newWatchLog()
	second, err := NewDispatcher([]Channel{{Name: "hook", Notifier: down{tries}, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	second.Start(context.Background())
	second.Send(tenantNote("a1", "team-a"))
	second.Send(tenantNote("b1", "team-b"))
	<-tries
	if a := log.next(t); a.Outcome != OutcomeRetrying {
		t.Fatalf("first attempt: %+v", a)
	}
	second.Stop(context.Background())
	ob.Close() // kill -9 closes nothing more than this: every owed entry is synced when Send returns

	ob = openOutbox(t, path)
	owed := ob.Owed()
	if len(owed) != 2 || owed[0].Notification.Alert.ID != "a1" || owed[1].Notification.Alert.ID != "b1" ||
		owed[0].Notification.Alert.Tenant != "team-a" || owed[1].Notification.Alert.Tenant != "team-b" {
		t.Fatalf("owed after the stop: %+v", owed)
	}
	again := newSink(clk)
	third, err := NewDispatcher([]Channel{{Name: "hook", Notifier: again, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: newWatchLog(), Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	third.Start(context.Background())
	for _, want := range []string{"a1", "b1"} {
		if got := again.next(t).m.Notification.Alert; got.ID != want {
			t.Fatalf("after the restart got %s of %s, want %s", got.ID, got.Tenant, want)
		}
	}
	third.Stop(context.Background())
	ob.Close()
	if owed := openOutbox(t, path).Owed(); len(owed) != 0 {
		t.Fatalf("still owed after delivery: %+v", owed)
	}
	if n := len(again.all()); n != 2 {
		t.Fatalf("%d messages after the restart, want 2", n)
	}
}

// What the next process cannot send is settled, each visibly: a channel
// that no longer serves the tenant (dropped), one that is gone (dropped),
// and a notification older than the channel's give_up_after (gave_up).
func TestOutboxSettlesWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	ob := openOutbox(t, path)
	for _, e := range []struct{ channel, tenant string }{{"hook", "team-a"}, {"gone", "team-b"}, {"hook", "team-b"}} {
		n := tenantNote(e.tenant+"-"+e.channel, e.tenant)
		if _, err := ob.Owe(e.channel, t0, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ob.Owe("hook", t0.Add(2*time.Hour), tenantNote("fresh", "team-a")); err != nil {
		t.Fatal(err)
	}
	ob.Close()

	clk := apollo.NewFakeClock(t0.Add(2*time.Hour + time.Minute))
	log := newWatchLog()
	s := newSink(clk)
	d, err := NewDispatcher([]Channel{{Name: "hook", Notifier: s, Tenants: []string{"team-a"}}},
		Options{Clock: clk, Log: log, Location: time.UTC, Outbox: openOutbox(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	if got := s.next(t).m.Notification.Alert.ID; got != "fresh" {
		t.Fatalf("sent %s", got)
	}
	d.Stop(context.Background())
	got := map[string]string{}
	for _, tenant := range []string{"team-a", "team-b"} {
		for _, a := range d.Attempts(AttemptFilter{Tenant: tenant}) {
			got[a.AlertID] = a.Outcome + ": " + a.Error
		}
	}
	for id, want := range map[string]string{"team-a-hook": "gave_up: owed since", "team-b-gone": "dropped: unknown channel",
		"team-b-hook": `dropped: the channel does not serve tenant "team-b"`, "fresh": "sent"} {
		if !strings.HasPrefix(got[id], want) {
			t.Errorf("%s: %q, want %q", id, got[id], want)
		}
	}
}

// A digest settles every notification folded into it.
func TestOutboxSettlesADigest(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	ob := openOutbox(t, path)
	d, err := NewDispatcher([]Channel{{Name: "hook", Notifier: s, RatePerMinute: 1}},
		Options{Clock: clk, Log: newWatchLog(), Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	d.Send(note("x0", "k0", "hook"))
	s.next(t)
	for _, id := range []string{"x1", "x2", "x3"} {
		d.Send(note(id, "k-"+id, "hook"))
	}
	// The lane waits for its turn and folds the rest in as they come.
	deadline := time.Now().Add(time.Minute)
	for !clk.BlockUntil(1, 10*time.Millisecond) || d.Stats().Channels["hook"].QueueLen > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lane did not fold the queue into a digest")
		}
	}
	clk.Advance(time.Minute)
	if m := s.next(t).m; m.Notification.Kind != KindDigest || len(m.Digest) != 3 {
		t.Fatalf("want a digest of 3, got %s with %d", m.Notification.Kind, len(m.Digest))
	}
	d.Stop(context.Background())
	ob.Close()
	if owed := openOutbox(t, path).Owed(); len(owed) != 0 {
		t.Fatalf("owed after the digest: %+v", owed)
	}
}

// A crash mid-append leaves a torn last line, which is dropped (that
// notification was never queued); a bad line before the end is an error
// that says what to do. A long run of settled entries is compacted away.
func TestOutboxFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "outbox.jsonl")
	ob := openOutbox(t, path)
	id, err := ob.Owe("hook", t0, tenantNote("kept", "team-a"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * compactAfter {
		n, err := ob.Owe("hook", t0, tenantNote("x", "team-b"))
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Settle(n); err != nil {
			t.Fatal(err)
		}
		if i == 0 && n <= id {
			t.Fatalf("ids %d then %d", id, n)
		}
	}
	ob.Close()
	if fi, err := os.Stat(path); err != nil || fi.Size() > 1<<20 {
		t.Fatalf("outbox of %d bytes after %d settled entries: %v", fi.Size(), 3*compactAfter, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"owe":{"id":99999,"channel":"hook","n":{"kind":"fir`)
	f.Close()
	ob = openOutbox(t, path)
	if owed := ob.Owed(); len(owed) != 1 || owed[0].ID != id || owed[0].Notification.Alert.Tenant != "team-a" {
		t.Fatalf("owed after a torn append: %+v", owed)
	}
	next, err := ob.Owe("hook", t0, tenantNote("y", "team-b"))
	if err != nil || next <= id {
		t.Fatalf("id %d after a reopen (last %d): %v", next, id, err)
	}
	ob.Close()

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("not json\n{\"settle\":[1]}\n"), 0o600)
	if _, err := OpenFileOutbox(bad); err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "move the file away") {
		t.Fatalf("a bad line: %v", err)
	}
}

// gate is a Notifier that holds every message until open is closed,
// signalling each on held, then records it in sink.
type gate struct {
	held chan *Message
	open chan struct{}
	sink *sink
}

func (g gate) Notify(ctx context.Context, m *Message) (bool, error) {
	g.held <- m
	<-g.open
	return g.sink.Notify(ctx, m)
}

// What another process owed is taken over by a lane whose queue is full
// (the HA takeover: the survivor's own channel is busy): every entry is
// sent once the channel frees, none dropped for want of room. Before,
// Requeue put them through the queue and dropped the excess as "queue
// full", settling it: notifications owed at least once were lost.
func TestRequeueBeyondAFullQueue(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	clk := apollo.NewFakeClock(t0)
	ob := openOutbox(t, path)
	g := gate{held: make(chan *Message, 10), open: make(chan struct{}), sink: newSink(clk)}
	log := newWatchLog()
	d, err := NewDispatcher([]Channel{{Name: "hook", Notifier: g, QueueSize: 2, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	defer d.Stop(context.Background())
	d.Send(tenantNote("live1", "team-a"))
	<-g.held // in flight; the next two fill the queue
	d.Send(tenantNote("live2", "team-b"))
	d.Send(tenantNote("live3", "team-a"))
	var taken []OwedNotification
	for _, id := range []string{"dead1", "dead2", "dead3"} {
		n := tenantNote(id, map[bool]string{true: "team-a", false: "team-b"}[id != "dead2"])
		oid, err := ob.Owe("hook", clk.Now(), n)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, OwedNotification{ID: oid, Channel: "hook", At: clk.Now(), Notification: n})
	}
	d.Requeue(taken)
	close(g.open)
	got := map[string]bool{}
	for range 6 {
		got[g.sink.next(t).m.Notification.Alert.ID] = true
	}
	if len(got) != 6 {
		t.Fatalf("delivered %v, want the three live and the three taken over", got)
	}
	for sent := 0; sent < 6; {
		switch a := log.next(t); a.Outcome {
		case OutcomeSent:
			sent++
		case OutcomeDropped:
			t.Fatalf("dropped: %+v", a)
		}
	}
	d.Stop(context.Background()) // waits for the lane, which settles after it records
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if len(ob.owed) != 0 {
		t.Fatalf("still owed after delivery: %+v", ob.owed)
	}
}

// A notification a stopped process owed keeps its give_up_after from when
// it was first owed: owed 30s before the restart on a channel that gives
// up after a minute, it is retried for the 30s left (tries at 0, 1, 3, 7
// and 15s; the next wait would end past 30s), not for a fresh minute. A
// notification of another tenant sent after the restart still gets its
// full minute from its first try. Before, every restart gave a requeued
// notification a fresh give_up_after, so a channel down across restarts
// was retried far longer than configured.
func TestRequeuedKeepsItsGiveUpDeadline(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	clk := apollo.NewFakeClock(t0)
	ob := openOutbox(t, path)
	n := tenantNote("old", "team-a")
	id, err := ob.Owe("hook", t0.Add(-30*time.Second), n)
	if err != nil {
		t.Fatal(err)
	}
	ob.Close()
	ob = openOutbox(t, path)
	log := newWatchLog()
	failing := NotifierFunc(func(context.Context, *Message) (bool, error) { return true, errors.New("503 down") })
	d, err := NewDispatcher([]Channel{{Name: "hook", Notifier: failing, GiveUpAfter: time.Minute, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	d.randN = func(n int64) int64 { return n - 1 } // always the longest wait
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	if owed := ob.Owed(); len(owed) != 1 || owed[0].ID != id {
		t.Fatalf("owed at start: %+v", owed)
	}
	tries := func(alert string, from time.Time, wantAt []time.Duration) {
		t.Helper()
		for i, w := range wantAt {
			a := log.next(t)
			want := OutcomeRetrying
			if i == len(wantAt)-1 {
				want = OutcomeGaveUp
			}
			if a.AlertID != alert || a.Outcome != want || a.Try != i+1 || a.At.Sub(from) != w*time.Second {
				t.Fatalf("%s attempt %d: %s of %s try %d at %s, want %s at %ds", alert, i+1, a.Outcome, a.AlertID, a.Try, a.At.Sub(from), want, w)
			}
			if want == OutcomeRetrying {
				if !clk.BlockUntil(1, testwait.Timeout(t)) {
					t.Fatal("no backoff timer armed")
				}
				clk.Advance(backoff(i+1, d.randN))
			}
		}
	}
	tries("old", t0, []time.Duration{0, 1, 3, 7, 15})
	from := clk.Now()
	d.Send(tenantNote("new", "team-b"))
	tries("new", from, []time.Duration{0, 1, 3, 7, 15, 31})
}

// Under a rate limit, what a stopped process owed (up to a digest batch
// and a full queue: twice queue_size) goes out in the channel's turns,
// folded into digests of up to queue_size like anything that waits for
// a turn, none dropped.
func TestRequeueUnderARateLimitFoldsIntoDigests(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	clk := apollo.NewFakeClock(t0)
	ob := openOutbox(t, path)
	for i := range 5 {
		if _, err := ob.Owe("hook", t0, tenantNote(fmt.Sprintf("owed%d", i), []string{"team-a", "team-b"}[i%2])); err != nil {
			t.Fatal(err)
		}
	}
	ob.Close()
	ob = openOutbox(t, path)
	s, log := newSink(clk), newWatchLog()
	d, err := NewDispatcher([]Channel{{Name: "hook", Notifier: s, QueueSize: 2, RatePerMinute: 1, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	defer d.Stop(context.Background())
	var got []string
	for _, want := range []int{1, 2, 2} { // the first turn is free; then a digest of queue_size a minute
		r := s.next(t)
		ids := []string{r.m.Notification.Alert.ID}
		if len(r.m.Digest) > 0 {
			ids = ids[:0]
			for _, it := range r.m.Digest {
				ids = append(ids, it.Notification.Alert.ID)
			}
		}
		if len(ids) != want {
			t.Fatalf("a message of %v, want %d notifications", ids, want)
		}
		got = append(got, ids...)
		for log.next(t).Outcome != OutcomeSent { // the attempt is over: its timer with it
		}
		if len(got) < 5 {
			if !clk.BlockUntil(1, testwait.Timeout(t)) {
				t.Fatal("the lane does not wait for its turn")
			}
			clk.Advance(time.Minute)
		}
	}
	if fmt.Sprint(got) != "[owed0 owed1 owed2 owed3 owed4]" {
		t.Fatalf("sent %v, want every owed one once, oldest first", got)
	}
}
