package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/alert/alerttest"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

func TestAlertStateConformance(t *testing.T) {
	alerttest.RunStateStore(t, func(t *testing.T) alert.StateStore {
		c, prefix := redistest.Client(t)
		return redisstore.NewAlertState(c, prefix, nil)
	})
}

func TestLockerConformance(t *testing.T) {
	c, prefix := redistest.Client(t)
	alerttest.RunLocker(t, alerttest.LockerHarness{
		New: func(*testing.T) alert.Locker { return redisstore.NewLocker(c, prefix+":") },
		Elapse: func(t *testing.T, d time.Duration) {
			if err := redistest.Elapse(context.Background(), c, prefix, d); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// Of two processes, one leads; when it stops, the other takes over.
func TestLease(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	// The renewal loops tick on a fake clock that never moves: a's lease
	// (a TTL in Redis, real time) must outlive a slow test, and b must
	// not retry behind the test's back.
	clock := apollo.NewFakeClock(time.Unix(1_800_000_000, 0))
	ttl := 3 * testwait.Timeout(t)
	a := redisstore.NewLease(c, prefix, "a", ttl).WithClock(clock)
	b := redisstore.NewLease(c, prefix, "b", ttl).WithClock(clock)
	a.Start(ctx)
	b.Start(ctx)
	defer b.Stop(context.Background())
	if !a.Held() || b.Held() {
		t.Fatalf("a %v, b %v: want a alone", a.Held(), b.Held())
	}
	if id, _ := redisstore.Leader(ctx, c, prefix); id != "a" {
		t.Fatalf("leader %q", id)
	}
	a.Stop(context.Background()) // releases at once
	b.Renew(ctx)
	if !b.Held() {
		t.Fatal("b did not take over a released lease")
	}
	if id, _ := redisstore.Leader(ctx, c, prefix); id != "b" {
		t.Fatalf("leader %q after the takeover", id)
	}
	// Only the leader saves the alerts, which every process computes;
	// what people wrote (a silence) is saved by any process.
	st := redisstore.NewAlertState(c, prefix, a)
	if err := st.Save(ctx, alert.State{Alerts: []alert.StoredAlert{{Alert: apollo.Alert{ID: "a1", State: apollo.AlertFiring}}},
		Silences: []alert.Silence{{ID: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Load(ctx); len(got.Alerts) != 0 || len(got.Silences) != 1 {
		t.Fatalf("a process that does not lead saved %+v; want the silence only", got)
	}
}

// Changes written by the bus reach the alert side through the change
// log; commands get the first reply, and no listener is reported.
func TestFeedsAndCommands(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *apollo.Change, 10)
	follower := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, nil)
	if err := follower.Seek(ctx, 0, "$"); err != nil {
		t.Fatal(err)
	}
	follower.Start(ctx)
	defer follower.Stop(ctx)
	// The channel hands on only what is not in the log too: the changes
	// of a bus of a release before it.
	onChannel := make(chan *apollo.Change, 10)
	stop, err := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { onChannel <- ch }, nil).SubscribeChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	feed := redisstore.NewChangeFeed(c, prefix, nil).WithClock(apollo.NewFakeClock(time.Unix(0, 0))) // Stop flushes
	feed.Start(ctx)
	feed.Apply(&apollo.Change{Prev: apollo.Before{Status: apollo.StatusRunning},
		Task: apollo.Task{TaskID: "t1", Name: "etl", Tenant: "acme", Status: apollo.StatusFailed}, Record: apollo.Record{Event: apollo.Event{Ts: 42}}})
	feed.Apply(&apollo.Change{Prev: apollo.Before{Status: apollo.StatusFailed}, Task: apollo.Task{Status: apollo.StatusFailed}}) // no status change: not sent
	// A missed start keeps the status and goes out, marked (ON: missed in
	// the alert processes).
	feed.Apply(&apollo.Change{Prev: apollo.Before{Status: apollo.StatusPending}, Task: apollo.Task{TaskID: "missed:etl@60", Name: "etl", Status: apollo.StatusPending},
		Record: apollo.Record{Kind: apollo.KindMissedStart, Event: apollo.Event{Ts: 43}}})
	// So does a run marked too short (ON: too_short), with its reason.
	feed.Apply(&apollo.Change{Prev: apollo.Before{Status: apollo.StatusSuccess}, Task: apollo.Task{TaskID: "quick", Name: "etl", Status: apollo.StatusSuccess},
		Record: apollo.Record{Kind: apollo.KindTooShort, Reason: "ran 2s", Event: apollo.Event{Ts: 44}}})
	feed.Stop(context.Background())
	kinds := []apollo.Kind{apollo.KindReport, apollo.KindMissedStart, apollo.KindTooShort}
	reasons := []string{"", "", "ran 2s"}
	for i, want := range []string{"t1", "missed:etl@60", "quick"} {
		select {
		case ch := <-got:
			if ch.Task.TaskID != want || (i == 0) != (ch.Task.Tenant == "acme") || ch.Record.Ts != int64(42+i) ||
				ch.Record.Kind != kinds[i] || ch.Record.Reason != reasons[i] {
				t.Fatalf("change %d: %+v", i, ch)
			}
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("change %d did not arrive", i)
		}
	}
	if s := feed.Stats(); s.Sent != 3 || s.Dropped != 0 {
		t.Errorf("feed stats %+v", s)
	}
	if err := c.Publish(ctx, prefix+":changes", `[{"n":"etl","id":"old","s":"failed","p":"running","ts":45}]`).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-onChannel:
		if ch.Task.TaskID != "old" || ch.Task.Status != apollo.StatusFailed || ch.Prev.Status != apollo.StatusRunning {
			t.Fatalf("from an older bus's channel: %+v, want the change to failed of run old", ch)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the change of an older bus did not arrive")
	}

	cm, err := redisstore.NewCommander(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if _, err := cm.Do(ctx, redisstore.Command{Op: "ack"}); err != redisstore.ErrNoAlertProcess {
		t.Fatalf("with nobody listening: %v", err)
	}
	stopServe, err := redisstore.ServeCommands(ctx, c, prefix, func(_ context.Context, cmd redisstore.Command) redisstore.Reply {
		if cmd.Op == "fail" {
			return redisstore.Reply{Err: &apollo.Error{Code: apollo.ENOTFOUND, Message: "no such alert"}}
		}
		return redisstore.Reply{Silence: &alert.Silence{ID: cmd.SilenceID}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopServe()
	r, err := cm.Do(ctx, redisstore.Command{Op: "silence.add", SilenceID: "s1"})
	if err != nil || r.Silence.ID != "s1" {
		t.Fatalf("reply %+v, %v", r, err)
	}
	if _, err := cm.Do(ctx, redisstore.Command{Op: "fail"}); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Fatalf("an error reply: %v", err)
	}
}

// TestHeartbeat: a beat at Start and one every interval of the process's
// clock, each stamped with it; three intervals of TTL; gone at Stop.
func TestHeartbeat(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	start := time.Unix(1_800_000_000, 0)
	clock := apollo.NewFakeClock(start)
	wrote := make(chan struct{}, 1) // the stats are read for every beat
	h := redisstore.NewHeartbeat(c, prefix, "alert", "p1", time.Hour).WithClock(clock).WithStats(func() any {
		select {
		case wrote <- struct{}{}:
		default:
		}
		return map[string]int{"n": 1}
	})
	h.Start(ctx)
	<-wrote
	beats, err := redisstore.Alive(ctx, c, prefix)
	if err != nil || len(beats) != 1 || beats[0].Component != "alert" || beats[0].ID != "p1" || beats[0].Stats == nil || !beats[0].At.Equal(start) {
		t.Fatalf("beats %+v, %v", beats, err)
	}
	if ttl := c.PTTL(ctx, prefix+":heartbeat:alert:p1").Val(); ttl <= 2*time.Hour || ttl > 3*time.Hour {
		t.Errorf("heartbeat ttl %v, want three intervals", ttl)
	}
	clock.Advance(time.Hour)
	select {
	case <-wrote:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no beat an interval of the clock later")
	}
	h.Stop(context.Background())
	if beats, _ := redisstore.Alive(ctx, c, prefix); len(beats) != 0 {
		t.Errorf("a stopped process still beats: %+v", beats)
	}
	// Its last beat says it stopped cleanly, for watchers that saw it.
	beats, err = redisstore.Heartbeats(ctx, c, prefix)
	if err != nil || len(beats) != 1 || !beats[0].Stopped || beats[0].ID != "p1" {
		t.Fatalf("after a clean stop: %+v, %v", beats, err)
	}
}
