package notify

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A channel shared by two tenants: one tenant's storm fills its own
// queue (queue_size each) and the rest of it is dropped, recorded in its
// own record; the other tenant's notifications are all queued, and the
// lane takes one of each tenant's in turn, each tenant's in the order
// sent.
func TestOneTenantsStormOverflowsOnlyItsOwnQueue(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	s := newSink(clk)
	d, err := NewDispatcher([]Channel{{Name: "ops", Notifier: s, QueueSize: 3, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	send := func(tenant string, i int) {
		n := note(tenant+strconv.Itoa(i), tenant+strconv.Itoa(i), "ops")
		n.Alert.Tenant = tenant
		d.Send(n)
	}
	// Not started yet: what is queued stays there.
	for i := range 10 {
		send("acme", i)
	}
	for i := range 2 {
		send("globex", i)
	}
	for range 7 {
		if a := log.next(t); a.Outcome != OutcomeDropped || a.Error != "queue full" || a.Tenant != "acme" {
			t.Fatalf("%+v, want acme's storm past its 3 dropped", a)
		}
	}
	if got := d.Stats().Channels["ops"].QueueLen; got != 5 {
		t.Fatalf("queueLen %d, want 5: 3 of acme's and 2 of globex's", got)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	for _, want := range []string{"acme0", "globex0", "acme1", "globex1", "acme2"} {
		if got := s.next(t).m.Notification.Alert.ID; got != want {
			t.Fatalf("delivered %s, want %s", got, want)
		}
	}
	d.Stop(context.Background())
	if as := d.Attempts(AttemptFilter{Tenant: "globex"}); len(as) != 2 || as[0].Outcome != OutcomeSent || as[1].Outcome != OutcomeSent {
		t.Fatalf("globex's record: %+v", as)
	}
}

// Under a rate limit, what waits for the turn is folded into one digest
// taking each tenant's in turn: with the digest's room (queue_size) less
// than what waits, a storm does not leave another tenant's notification
// out of it.
func TestDigestTakesEachTenantInTurn(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	busy, release := make(chan struct{}), make(chan struct{})
	var first bool
	held := NotifierFunc(func(ctx context.Context, m *Message) (bool, error) {
		if !first { // the lane is busy with the first while the rest waits
			first = true
			busy <- struct{}{}
			<-release
		}
		return s.Notify(ctx, m)
	})
	d := startDispatcher(t, clk, newWatchLog(), Channel{Name: "ding", Notifier: held, RatePerMinute: 1, QueueSize: 4, Tenants: []string{AllTenants}})
	send := func(tenant string, i int) {
		n := note(tenant+strconv.Itoa(i), tenant+strconv.Itoa(i), "ding")
		n.Alert.Tenant = tenant
		d.Send(n)
	}
	send("acme", 0)
	<-busy
	for i := 1; i <= 4; i++ {
		send("acme", i)
	}
	send("globex", 0)
	close(release)
	if got := s.next(t).m.Notification.Alert.ID; got != "acme0" {
		t.Fatalf("first %s", got)
	}
	// The lane waits a minute for its turn, collecting up to 4 (and acme4
	// stays queued for the next turn).
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the lane does not wait for its turn")
	}
	deadline := time.Now().Add(testwait.Timeout(t))
	for d.Stats().Channels["ding"].QueueLen > 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lane does not collect what waits")
		}
		runtime.Gosched()
	}
	clk.Advance(time.Minute)
	var ids []string
	for _, m := range s.next(t).m.Digest {
		ids = append(ids, m.Notification.Alert.ID)
	}
	if want := []string{"acme1", "globex0", "acme2", "acme3"}; !slices.Equal(ids, want) {
		t.Fatalf("digest %v, want %v", ids, want)
	}
}

// What a lane took and put back (a digest for a webhook carries only so
// many) comes out again first, each tenant's in the order taken and ahead
// of what the tenant had left, and counts as waiting.
func TestFairQueuePutBackComesOutFirst(t *testing.T) {
	t.Parallel()
	q := newFairQueue(10, 100)
	push := func(tenant, id string) {
		n := apollo.Notification{Alert: apollo.Alert{ID: id, Tenant: tenant}}
		if kept, _, _ := q.push(item{n: n}); !kept {
			t.Fatalf("%s refused", id)
		}
	}
	for _, id := range []string{"a0", "a1", "a2"} {
		push("acme", id)
	}
	push("globex", "g0")
	taken := q.take(3) // a0 g0 a1
	q.putBack(taken[1:])
	if got := q.len(); got != 3 {
		t.Fatalf("len %d, want 3: g0, a1 back and a2", got)
	}
	var ids []string
	for _, it := range q.take(10) {
		ids = append(ids, it.n.Alert.ID)
	}
	if want := []string{"g0", "a1", "a2"}; !slices.Equal(ids, want) {
		t.Fatalf("took %v, want %v", ids, want)
	}
}

// A channel shared by many tenants holds at most queue_total of their
// notifications together, whatever the number of tenants. Past it the
// tenant with the longest queue overflows: a storm of acme's fills its own
// queue (queue_size 4) and the channel's (queue_total 6); then each of
// four other tenants' one notification is kept, and acme's newest is
// dropped to make room, recorded in acme's record as dropped and counted;
// once every queue is as short as the new tenant's, the new one is
// dropped instead. Before, the channel held up to queue_size for every
// tenant, with nothing bounding the number of tenants.
func TestChannelTotalOverflowsTheLongestQueue(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	s := newSink(clk)
	d, err := NewDispatcher([]Channel{{Name: "ops", Notifier: s, QueueSize: 4, QueueTotal: 6, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	send := func(tenant string, i int) {
		n := note(tenant+strconv.Itoa(i), tenant+strconv.Itoa(i), "ops")
		n.Alert.Tenant = tenant
		d.Send(n)
	}
	dropped := func(tenant, id, why string) {
		t.Helper()
		a := log.next(t)
		if a.Outcome != OutcomeDropped || a.Tenant != tenant || a.AlertID != id || a.Error != why {
			t.Fatalf("%+v, want %s's %s dropped: %s", a, tenant, id, why)
		}
	}
	// Not started: what is queued stays there.
	for i := range 5 {
		send("acme", i)
	}
	dropped("acme", "acme4", whyQueueFull)
	send("globex", 0)
	send("globex", 1)
	if got := d.Stats().Channels["ops"].QueueLen; got != 6 {
		t.Fatalf("queueLen %d, want 6", got)
	}
	// At the total: acme's queue is the longest, and overflows.
	send("initech", 0)
	dropped("acme", "acme3", whyChannelFull)
	send("umbrella", 0)
	dropped("acme", "acme2", whyChannelFull)
	// acme 2, globex 2, initech 1, umbrella 1: a fifth tenant's one is
	// kept at the cost of acme's or globex's, never of a queue of one.
	// Then no queue is longer than a newcomer's would be by two: the
	// newcomer's is dropped.
	send("hooli", 0)
	if a := log.next(t); a.Outcome != OutcomeDropped || (a.Tenant != "acme" && a.Tenant != "globex") || a.Error != whyChannelFull {
		t.Fatalf("%+v, want acme's or globex's newest dropped", a)
	}
	// Every queue holds one or two; a tenant with two cannot add.
	send("globex", 2)
	if a := log.next(t); a.Outcome != OutcomeDropped || a.Error != whyChannelFull {
		t.Fatalf("%+v, want a drop of the longest queue's", a)
	}
	send("initech", 1)
	if a := log.next(t); a.Outcome != OutcomeDropped || a.Error != whyChannelFull {
		t.Fatalf("%+v, want a drop of the longest queue's", a)
	}
	st := d.Stats().Channels["ops"]
	if st.QueueLen != 6 || st.Dropped != 6 {
		t.Fatalf("queueLen %d, dropped %d; want 6 and 6: the channel holds its total and counts what it drops", st.QueueLen, st.Dropped)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	got := map[string]int{}
	for range 6 {
		got[s.next(t).m.Notification.Alert.Tenant]++
	}
	for _, tenant := range []string{"acme", "globex", "initech", "umbrella", "hooli"} {
		if got[tenant] == 0 {
			t.Errorf("none of %s's delivered: %v", tenant, got)
		}
	}
}

// What a process that stopped owed takes its tenant's room and the
// channel's: acme owes six when the lane starts, past its queue_size of
// 4 and at the channel's queue_total of 6. A new notification of acme's
// is dropped (queue full); globex's is kept, and acme's newest owed is
// dropped to make room for it, recorded and settled in the outbox. The
// channel holds its total. Before, what was owed counted in no bound:
// acme's new one was queued besides the six, and the channel held eight.
func TestOwedTakesItsTenantsRoom(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	ob := openOutbox(t, filepath.Join(t.TempDir(), "outbox.jsonl"))
	var owed []OwedNotification
	for i := range 6 {
		n := note("acme"+strconv.Itoa(i), "acme"+strconv.Itoa(i), "ops")
		n.Alert.Tenant = "acme"
		id, err := ob.Owe("ops", t0, n)
		if err != nil {
			t.Fatal(err)
		}
		owed = append(owed, OwedNotification{ID: id, Channel: "ops", At: t0, Notification: n})
	}
	d, err := NewDispatcher([]Channel{{Name: "ops", Notifier: newSink(clk), QueueSize: 4, QueueTotal: 6, Tenants: []string{AllTenants}}},
		Options{Clock: clk, Log: log, Location: time.UTC, Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	d.Requeue(owed) // not started: what is queued stays there
	send := func(tenant, id string) {
		n := note(id, id, "ops")
		n.Alert.Tenant = tenant
		d.Send(n)
	}
	send("acme", "acme6")
	if a := log.next(t); a.Outcome != OutcomeDropped || a.AlertID != "acme6" || a.Error != whyQueueFull {
		t.Fatalf("%+v, want acme's new one dropped: its queue holds what it owed", a)
	}
	send("globex", "globex0")
	if a := log.next(t); a.Outcome != OutcomeDropped || a.Tenant != "acme" || a.AlertID != "acme5" || a.Error != whyChannelFull {
		t.Fatalf("%+v, want acme's newest owed dropped to make room for globex's", a)
	}
	if st := d.Stats().Channels["ops"]; st.QueueLen != 6 || st.Dropped != 2 {
		t.Fatalf("queueLen %d, dropped %d; want 6 and 2", st.QueueLen, st.Dropped)
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if _, ok := ob.owed[owed[5].ID]; len(ob.owed) != 6 || ok {
		t.Fatalf("the outbox owes %d, acme5 among them: %v; want 6, acme's five left and globex's one", len(ob.owed), ok)
	}
}
