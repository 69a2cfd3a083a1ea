package alert_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/alert/alerttest"
	"github.com/apollo-11/apollo/internal/testwait"
)

// 300 failures of batch_ jobs within one minute make two messages: the
// first failure at once, and one follow-up at the end of the group window
// with the other 299 and the jobs that failed most (invariant 6). The quiet
// window after it ends the storm, without a message.
func TestStormOfFailuresIsTwoMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `RULE storm task_prefix: "batch_" ON: failed, timeout NOTIFY: dingtalk`, newTable(), nil)
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		job := fmt.Sprintf("batch_%d", i%10)
		if i%10 < 3 {
			job = "batch_hot" // 90 of the 300
		}
		c := finish(nil, "", job, fmt.Sprintf("run-%d", i), apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
		f.eng.Apply(&c)
		if i == 0 {
			n := f.sink.Wait(t, testwait.Timeout(t)) // at once, before the rest arrive
			if n.Kind != firing || n.Alert.Count != 1 || !strings.Contains(n.Alert.Summary, "failed") {
				t.Fatalf("first message %+v", n)
			}
		}
		f.clock.Advance(190 * time.Millisecond) // 300 events in 57 s
	}
	// The group timer and the evaluation ticker are armed.
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the group timer was not armed")
	}
	a := f.only("", apollo.AlertFiring)
	if a.Count != 300 || a.TopNames[0] != "batch_hot" {
		t.Fatalf("open group %+v", a)
	}
	f.clock.Advance(3 * time.Second) // past one minute after the first
	n := f.sink.Wait(t, testwait.Timeout(t))
	if n.Kind != storm || n.Alert.Count != 299 || n.Alert.TopNames[0] != "batch_hot" || len(n.Alert.TopNames) != 5 {
		t.Fatalf("follow-up %+v", n)
	}
	if n.Alert.Value != 300 || !strings.HasPrefix(n.Alert.Summary, "batch_hot failed (run run-0)") {
		t.Errorf("follow-up: %v in all, summary %q; want 300, and the first failure", n.Alert.Value, n.Alert.Summary)
	}
	f.only("", apollo.AlertFiring) // the storm may go on
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the group timer was not armed again")
	}
	changes, cancel := f.eng.Subscribe()
	defer cancel()
	f.clock.Advance(time.Minute)
	for a := range changes {
		if a.State == apollo.AlertResolved {
			break
		}
	}
	f.eng.Stop(context.Background())
	if got := len(f.sink.Notes()); got != 2 {
		t.Fatalf("%d messages, want 2: %v", got, kinds(f.sink.Notes()))
	}
	if a := f.only("", apollo.AlertResolved); a.Count != 300 {
		t.Fatalf("closed group %+v", a)
	}
}

// A storm that goes on is told at once, then at most once per
// GROUP_WINDOW for as long as it lasts, each message with the matches since
// the one before: a failure every 2 s for 5 minutes is 6 messages (the
// first, and one at the end of each minute), not two a minute. The first
// quiet window ends the storm without a message.
func TestSustainedStormOneMessagePerWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `RULE storm task_prefix: "batch_" ON: failed GROUP_WINDOW: 1m NOTIFY: dingtalk`, newTable(), nil)
	changes, cancel := f.eng.Subscribe()
	defer cancel()
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	const every, lasts = 2 * time.Second, 5 * time.Minute
	for i := range int(lasts / every) {
		at := t0.Add(time.Duration(i) * every)
		f.clock.Set(at)
		if i > 0 && at.Sub(t0)%time.Minute == 0 {
			// A window ended: its message comes before this failure counts.
			f.sink.Wait(t, testwait.Timeout(t))
		}
		c := finish(nil, "", fmt.Sprintf("batch_%d", i%7), fmt.Sprintf("run-%d", i), apollo.StatusFailed, at.UnixMilli(), 100)
		f.eng.Apply(&c)
		if i == 0 {
			f.sink.Wait(t, testwait.Timeout(t))
		}
	}
	// The last window ends with the group timer; the next, quiet one ends
	// the storm.
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the group timer was not armed")
	}
	f.clock.Set(t0.Add(lasts))
	f.sink.Wait(t, testwait.Timeout(t))
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatalf("the storm ended with a message; want it open for one more window. %d messages: %v",
			len(f.sink.Notes()), kinds(f.sink.Notes()))
	}
	f.clock.Set(t0.Add(lasts + time.Minute))
	for a := range changes {
		if a.State == apollo.AlertResolved {
			if a.Count != 150 {
				t.Fatalf("the storm resolved with %d matches, want 150", a.Count)
			}
			break
		}
	}
	f.eng.Stop(context.Background())
	all := f.sink.Notes()
	if len(all) != 6 {
		t.Fatalf("%d messages for a 5-minute storm, want 6: %v", len(all), kinds(all))
	}
	total := 0
	for i, n := range all {
		want := storm
		if i == 0 {
			want = firing
		}
		if n.Kind != want {
			t.Fatalf("message %d: %s %+v", i, n.Kind, n.Alert)
		}
		if i > 0 && n.At.Sub(all[i-1].At) < time.Minute {
			t.Fatalf("message %d came %v after the one before, within one GROUP_WINDOW", i, n.At.Sub(all[i-1].At))
		}
		if wantCount := []int{1, 29, 30, 30, 30, 30}[i]; n.Alert.Count != wantCount {
			t.Fatalf("message %d carries %d matches, want %d (since the message before)", i, n.Alert.Count, wantCount)
		}
		total += n.Alert.Count
	}
	if total != 150 {
		t.Fatalf("the messages carry %d matches in all, want 150", total)
	}
}

// A match after the group window is a new group, told at once; a change
// that keeps the status, another status, another prefix or another
// tenant is no match.
func TestEventRuleMatching(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `RULE ev task_prefix: "etl_" ON: failed GROUP_WINDOW: 10s NOTIFY: ops`, newTable(), nil)
	f.eng.SetRules("b", parse(t, `RULE ev task_prefix: "etl_" ON: timeout NOTIFY: ops`))
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	now := f.clock.Now().UnixMilli()
	skip := []apollo.Change{
		finish(nil, "", "etl_a", "x1", apollo.StatusSuccess, now, 1),
		finish(nil, "", "batch_a", "x2", apollo.StatusFailed, now, 1),
		finish(nil, "b", "etl_a", "x3", apollo.StatusFailed, now, 1),
	}
	same := finish(nil, "", "etl_a", "x4", apollo.StatusFailed, now, 1)
	same.Prev.Status = apollo.StatusFailed // a correction that keeps the status
	for _, c := range append(skip, same) {
		f.eng.Apply(&c)
	}
	c := finish(nil, "", "etl_a", "x5", apollo.StatusFailed, now, 1)
	f.eng.Apply(&c)
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Count != 1 || !strings.Contains(n.Alert.Summary, "etl_a failed (run x5)") {
		t.Fatalf("first match %+v", n.Alert)
	}
	f.clock.Advance(11 * time.Second)
	c = finish(nil, "", "etl_b", "x6", apollo.StatusFailed, f.clock.Now().UnixMilli(), 1)
	f.eng.Apply(&c)
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Kind != firing || n.Alert.TopNames[0] != "etl_b" {
		t.Fatalf("a match after the window %+v", n)
	}
	c = finish(nil, "b", "etl_c", "x7", apollo.StatusTimeout, f.clock.Now().UnixMilli(), 1)
	f.eng.Apply(&c)
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Tenant != "b" || n.Alert.Group != "etl_" {
		t.Fatalf("tenant b %+v", n)
	}
	f.eng.Stop(context.Background())
	if got := len(f.sink.Notes()); got != 3 {
		t.Fatalf("%d messages: %v", got, kinds(f.sink.Notes()))
	}
	if len(f.eng.Alerts("b", "")) != 1 || len(f.eng.Alerts("", "")) != 2 {
		t.Fatalf("alerts a %+v b %+v", f.eng.Alerts("", ""), f.eng.Alerts("b", ""))
	}
}

// Two engines sharing one memory lock send each notification once.
func TestMemoryLockerConformance(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	shared := alert.NewMemoryLocker(clock)
	alerttest.RunLocker(t, alerttest.LockerHarness{
		New:    func(*testing.T) alert.Locker { return shared },
		Elapse: func(_ *testing.T, d time.Duration) { clock.Advance(d) },
		Clock:  clock,
	})
}

func TestStateStoreConformance(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		alerttest.RunStateStore(t, func(*testing.T) alert.StateStore { return alert.NewMemoryState() })
	})
	t.Run("File", func(t *testing.T) {
		alerttest.RunStateStore(t, func(t *testing.T) alert.StateStore {
			return alert.NewFileState(t.TempDir() + "/alerts.json")
		})
	})
}

// SelfAlert folds like an event rule: one message at once, one follow-up.
func TestSelfAlert(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ``, newTable(), func(o *alert.Options) { o.SelfChannels = []string{"ops"} })
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.eng.SelfAlert("holding_full", apollo.SeverityCritical, "the holding area is full; events are refused")
	}
	n := f.sink.Wait(t, testwait.Timeout(t))
	if n.Kind != apollo.NotifySelf || n.Alert.Severity != apollo.SeverityCritical || n.Alert.Rule != "apollo:holding_full" {
		t.Fatalf("self alert %+v", n)
	}
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("group timer not armed")
	}
	f.clock.Advance(alert.SelfGroupWindow)
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Kind != apollo.NotifySelf || n.Alert.Count != 2 {
		t.Fatalf("follow-up %+v", n)
	}
}

// Subscribers see every change; one that falls behind is dropped.
func TestSubscribe(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "j" BY: name THRESHOLD: failed > 0 DURATION: 10s`, tb, nil)
	ch, cancel := f.eng.Subscribe()
	slow, _ := f.eng.Subscribe()
	tb.set("j1", failing(1, 1))
	f.eval(0)
	f.eval(10 * time.Second)
	var states []apollo.AlertState
	for range 2 {
		states = append(states, (<-ch).State)
	}
	if !slices.Equal(states, []apollo.AlertState{apollo.AlertPending, apollo.AlertFiring}) {
		t.Fatalf("changes %v", states)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("the channel is open after cancel")
	}
	for i := range alert.SubscriberBuffer {
		tb.set(fmt.Sprintf("j%d", i+2), failing(1, 1))
	}
	f.eval(10 * time.Second) // SubscriberBuffer new pending alerts: the slow reader overflows
	n := 0
	for range slow {
		n++
	}
	if n != alert.SubscriberBuffer {
		t.Fatalf("the slow subscriber got %d changes before it was dropped, want %d", n, alert.SubscriberBuffer)
	}
}

// Two engines that notice the same outage a moment apart send one
// self-alert between them: its dedup key does not carry either's clock.
func TestSelfAlertOnceAcrossEngines(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	locker := alert.NewMemoryLocker(clock)
	sink := alerttest.NewSink(10)
	var engines []*alert.Engine
	for range 2 {
		e, err := alert.New(alert.Options{Store: newTable(), Sender: sink, Locker: locker, Clock: clock, Logger: quiet, SelfChannels: []string{"ops"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(bg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Stop(context.Background()) })
		engines = append(engines, e)
	}
	engines[0].SelfAlert("component_down", apollo.SeverityCritical, "no bus")
	clock.Advance(7 * time.Second)
	engines[1].SelfAlert("component_down", apollo.SeverityCritical, "no bus")
	got := []apollo.Notification{<-sink.C}
	for _, e := range engines {
		e.Stop(context.Background()) // flushes whatever either still had to send
	}
	for {
		select {
		case n := <-sink.C:
			got = append(got, n)
			continue
		default:
		}
		break
	}
	if len(got) != 1 {
		t.Fatalf("%d self-alert notifications from two engines, want 1: %+v", len(got), got)
	}
}

// gatedState is a StateStore whose saves wait until let is closed once
// the first has begun: a slow disk, or a Redis that is away.
type gatedState struct {
	alert.StateStore
	began chan struct{}
	once  sync.Once
	let   chan struct{}
}

func (g *gatedState) Save(ctx context.Context, s alert.State) error {
	g.once.Do(func() { close(g.began) })
	<-g.let
	return g.StateStore.Save(ctx, s)
}

// The save after a storm's first message does not hold back the next
// message: another tenant's storm is told while the first is being saved.
// Before, the goroutine that delivers saved too, and the second tenant's
// first message waited for the save (for go-redis's timeouts, with Redis
// away).
func TestASlowSaveHoldsNoMessageBack(t *testing.T) {
	t.Parallel()
	st := &gatedState{StateStore: alert.NewMemoryState(), began: make(chan struct{}), let: make(chan struct{})}
	src := `RULE storm task_prefix: "batch_" ON: failed NOTIFY: dingtalk`
	f := newFixture(t, src, newTable(), func(o *alert.Options) { o.State = st })
	f.eng.SetRules("b", parse(t, src))
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer close(st.let)
	c := finish(nil, "", "batch_a", "run-a", apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
	f.eng.Apply(&c)
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Tenant != "" {
		t.Fatalf("first message %+v", n)
	}
	<-st.began // its save waits
	c = finish(nil, "b", "batch_b", "run-b", apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
	f.eng.Apply(&c)
	if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Tenant != "b" || n.Kind != firing {
		t.Fatalf("tenant b's first message %+v", n)
	}
}

// An event rule edited under its name while its storm goes on takes the
// storm along, as a rate rule takes its alerts: the open group shows the
// rule's new severity at once, and the follow-up goes to the channels the
// rule names now. The other tenant's rule of the same name, not edited,
// keeps its channels.
func TestEditedEventRuleTakesItsStormAlong(t *testing.T) {
	t.Parallel()
	const src = `RULE storm task_prefix: "batch_" ON: failed GROUP_WINDOW: 1m NOTIFY: dingtalk, email`
	f := newFixture(t, src, newTable(), nil)
	f.eng.SetRules("globex", parse(t, src))
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		for _, tenant := range []string{"", "globex"} {
			c := finish(nil, tenant, "batch_x", fmt.Sprintf("run-%d", i), apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
			f.eng.Apply(&c)
		}
		if i == 0 {
			f.sink.Wait(t, testwait.Timeout(t))
			f.sink.Wait(t, testwait.Timeout(t))
		}
	}
	f.eng.SetRules("", parse(t, `RULE storm task_prefix: "batch_" ON: failed GROUP_WINDOW: 1m SEVERITY: critical NOTIFY: wecom`))
	if a := f.only("", apollo.AlertFiring); a.Severity != apollo.SeverityCritical || !slices.Equal(a.Channels, []string{"wecom"}) {
		t.Fatalf("the open group after the edit: severity %s, channels %v; want critical, [wecom]", a.Severity, a.Channels)
	}
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the group timer was not armed")
	}
	f.clock.Advance(time.Minute)
	got := map[string]apollo.Notification{}
	for len(got) < 2 {
		n := f.sink.Wait(t, testwait.Timeout(t))
		got[n.Alert.Tenant] = n
	}
	if n := got[""]; n.Kind != storm || n.Alert.Count != 3 || n.Alert.Severity != apollo.SeverityCritical || !slices.Equal(n.Channels, []string{"wecom"}) {
		t.Errorf("the edited rule's follow-up: %s of %d, severity %s, to %v; want storm of 3, critical, to [wecom]", n.Kind, n.Alert.Count, n.Alert.Severity, n.Channels)
	}
	if n := got["globex"]; n.Kind != storm || n.Alert.Severity != apollo.SeverityWarning || !slices.Equal(n.Channels, []string{"dingtalk", "email"}) {
		t.Errorf("globex's follow-up: %s, severity %s, to %v; want storm, warning, to [dingtalk email]", n.Kind, n.Alert.Severity, n.Channels)
	}
}

// signalledState is a StateStore that tells of every save it took.
type signalledState struct {
	alert.StateStore
	saved chan alert.State
}

func (s *signalledState) Save(ctx context.Context, st alert.State) error {
	err := s.StateStore.Save(ctx, st)
	select {
	case s.saved <- st:
	default:
	}
	return err
}

// A storm's open group is saved just after its first message, every time,
// without waiting for an evaluation. The engine queued the message before
// it marked the state changed, so the deliverer could send it and ask for
// a save that found nothing changed, and the group stayed unsaved until
// the next evaluation (a minute by default): a kill -9 in that minute told
// the storm again as a new one (TestStormGoesOnAcrossKill failed so under
// load). Many storms, one after another, each waited for on its save.
func TestEveryStormIsSavedAfterItsFirstMessage(t *testing.T) {
	t.Parallel()
	st := &signalledState{StateStore: alert.NewMemoryState(), saved: make(chan alert.State, 1)}
	src := `RULE storm task_prefix: "batch_" ON: failed GROUP_WINDOW: 1m NOTIFY: dingtalk`
	f := newFixture(t, src, newTable(), func(o *alert.Options) { o.State = st })
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(testwait.Timeout(t))
	defer deadline.Stop()
	for i := range 300 {
		tenant := fmt.Sprintf("t%d", i)
		f.eng.SetRules(tenant, parse(t, src))
		c := finish(nil, tenant, "batch_a", "run-"+tenant, apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
		f.eng.Apply(&c)
		if n := f.sink.Wait(t, testwait.Timeout(t)); n.Alert.Tenant != tenant {
			t.Fatalf("storm %d: first message %+v", i, n)
		}
		for saved := false; !saved; {
			select {
			case s := <-st.saved:
				saved = slices.ContainsFunc(s.Alerts, func(a alert.StoredAlert) bool { return a.Tenant == tenant })
			case <-deadline.C:
				t.Fatalf("storm %d of tenant %s: told, and not saved without an evaluation", i, tenant)
			}
		}
	}
}
