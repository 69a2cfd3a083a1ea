package notify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"

	apollo "github.com/apollo-11/apollo"
)

// The dispatcher delivers every notification it is handed: removing
// duplicates is the alert engine's (its lock is keyed by tenant and shared
// by every alert process). Two tenants' notifications with one dedup key
// both reach the channel, and a notification naming a channel twice is
// delivered to it once.
func TestDispatcherDeliversWhatItIsGiven(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	a, b := newSink(clk), newSink(clk)
	d := startDispatcher(t, clk, log, Channel{Name: "a", Notifier: a, Tenants: []string{AllTenants}},
		Channel{Name: "b", Notifier: b, Tenants: []string{AllTenants}})
	first, second := note("x1", "k", "a", "b", "a"), note("x2", "k", "a")
	first.Alert.Tenant, second.Alert.Tenant = "team-a", "team-b"
	d.Send(first)
	d.Send(second)
	var tenants []string
	for range 2 {
		tenants = append(tenants, a.next(t).m.Notification.Alert.Tenant)
	}
	b.next(t)
	if strings.Join(tenants, ",") != "team-a,team-b" {
		t.Fatalf("channel a got the notifications of %v", tenants)
	}
	for range 3 {
		if got := log.next(t); got.Outcome != OutcomeSent {
			t.Fatalf("attempt %+v", got)
		}
	}
	if st := d.Stats().Channels["a"]; st.Queued != 2 || st.Sent != 2 {
		t.Fatalf("channel a: %+v", st)
	}
}

// Channels belong to tenants: without tenants a channel is the default
// tenant's (a configuration without tenants works as before), "*" shares
// it with all. A notification of a tenant the channel does not serve is
// dropped and recorded, for that tenant to see, and never reaches it.
func TestChannelsServeTheirTenants(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	own, a, shared := newSink(clk), newSink(clk), newSink(clk)
	d := startDispatcher(t, clk, log, Channel{Name: "own", Notifier: own},
		Channel{Name: "a", Notifier: a, Tenants: []string{"team-a", ""}},
		Channel{Name: "shared", Notifier: shared, Tenants: []string{AllTenants}})
	for _, tc := range []struct {
		tenant string
		serves []string
	}{{"", []string{"own", "a", "shared"}}, {"team-a", []string{"a", "shared"}}, {"team-b", []string{"shared"}}} {
		if got := d.ChannelsFor(tc.tenant); strings.Join(got, ",") != strings.Join(tc.serves, ",") {
			t.Errorf("channels for %q: %v, want %v", tc.tenant, got, tc.serves)
		}
		for _, ch := range []string{"own", "a", "shared", "nowhere"} {
			if got, want := d.Serves(tc.tenant, ch), slices.Contains(tc.serves, ch); got != want {
				t.Errorf("Serves(%q, %q) = %v, want %v", tc.tenant, ch, got, want)
			}
		}
	}
	n := note("b1", "k", "own", "a", "shared")
	n.Alert.Tenant = "team-b"
	d.Send(n)
	if got := shared.next(t).m.Notification.Alert.Tenant; got != "team-b" {
		t.Fatalf("shared channel got tenant %q", got)
	}
	outcomes := map[string]string{}
	for range 3 {
		a := log.next(t)
		outcomes[a.Channel] = a.Outcome + " " + a.Error
	}
	want := map[string]string{"own": `dropped the channel does not serve tenant "team-b"`,
		"a": `dropped the channel does not serve tenant "team-b"`, "shared": "sent "}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	if got := d.Attempts(AttemptFilter{Tenant: "team-b"}); len(got) != 3 {
		t.Fatalf("team-b sees %d attempts, want 3: %+v", len(got), got)
	}
	if len(own.all()) != 0 || len(a.all()) != 0 {
		t.Fatal("a channel of other tenants got team-b's notification")
	}
}

func TestChannelTenantsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tenants []string
		msg     string
	}{{[]string{}, "an empty list lets no tenant use the channel"}, {[]string{"*", "team-a"}, `"*" already shares the channel`}} {
		_, err := NewDispatcher([]Channel{{Name: "c", Notifier: newSink(nil), Tenants: tc.tenants}}, Options{})
		if err == nil || !strings.Contains(err.Error(), "channels.c.tenants") || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("tenants %q: %v", tc.tenants, err)
		}
	}
}

// TestRateLimitCoalesces sends 60 notifications to a channel limited to 20
// a minute, all at once and one a second: no 60-second window may hold
// more than 20 messages, and every notification must reach the channel,
// alone or in a digest.
func TestRateLimitCoalesces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"burst", 0}, {"one a second", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := apollo.NewFakeClock(t0)
			s := newSink(clk)
			d := startDispatcher(t, clk, NewMemoryLog(1000), Channel{Name: "ding", Notifier: s, RatePerMinute: 20})
			for i := range 60 {
				d.Send(note("a"+strconv.Itoa(i), "k"+strconv.Itoa(i), "ding"))
				if tc.every > 0 {
					waitQueueEmpty(t, d.lanes["ding"])
					clk.Advance(tc.every)
				}
			}
			covered := func() int {
				n := 0
				for _, r := range s.all() {
					n += max(1, len(r.m.Digest))
				}
				return n
			}
			deadline := time.Now().Add(testwait.Timeout(t))
			for covered() < 60 {
				if time.Now().After(deadline) {
					t.Fatalf("%d of 60 notifications delivered", covered())
				}
				if clk.BlockUntil(1, 100*time.Millisecond) {
					clk.Advance(time.Second)
				}
			}
			// The sink has seen the last message; its outcome is recorded
			// when the notifier returns. Stop waits for the lane, so the
			// stats below are final.
			d.Stop(context.Background())
			checkRateAndCoverage(t, d, s.all(), 20)
		})
	}
}

// waitQueueEmpty waits until the lane has taken everything from its queue.
func waitQueueEmpty(t *testing.T, l *lane) {
	t.Helper()
	deadline := time.Now().Add(testwait.Timeout(t))
	for l.queue.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("lane did not take from its queue")
		}
		runtime.Gosched()
	}
}

func checkRateAndCoverage(t *testing.T, d *Dispatcher, got []received, perMinute int) {
	t.Helper()
	// The pace counts from the start of each attempt, as the log records it.
	var starts []time.Time
	for _, a := range d.Attempts(AttemptFilter{Channel: "ding"}) {
		if a.Outcome == OutcomeSent {
			starts = append(starts, a.At)
		}
	}
	for _, s := range starts {
		in := 0
		for _, o := range starts {
			if !o.Before(s) && o.Sub(s) < time.Minute {
				in++
			}
		}
		if in > perMinute {
			t.Fatalf("%d messages within the minute from %s", in, s.Sub(t0))
		}
	}
	seen := map[string]bool{}
	digests := 0
	for _, r := range got {
		if r.m.Notification.Kind != KindDigest {
			seen[r.m.Notification.Alert.ID] = true
			continue
		}
		digests++
		if want := fmt.Sprintf("%d notifications", len(r.m.Digest)); r.m.Title != want {
			t.Errorf("digest title %q, want %q", r.m.Title, want)
		}
		for _, m := range r.m.Digest {
			seen[m.Notification.Alert.ID] = true
		}
	}
	if len(seen) != 60 || digests == 0 {
		t.Fatalf("%d distinct alerts delivered, %d digests", len(seen), digests)
	}
	st := d.Stats().Channels["ding"]
	if st.Sent != int64(len(got)) || st.Coalesced+st.Sent-int64(digests) != 60 || st.Dropped != 0 {
		t.Fatalf("stats %+v for %d messages, %d digests", st, len(got), digests)
	}
	t.Logf("%d messages, %d of them digests, over %s", len(got), digests, starts[0].Sub(starts[len(starts)-1]))
}

func TestSlowChannelDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	entered := make(chan struct{}, 10)
	hung := NotifierFunc(func(ctx context.Context, _ *Message) (bool, error) {
		entered <- struct{}{}
		<-ctx.Done() // hangs until the attempt times out
		return true, ctx.Err()
	})
	fast := newSink(clk)
	d := startDispatcher(t, clk, log,
		Channel{Name: "hung", Notifier: hung, Timeout: time.Minute},
		Channel{Name: "fast", Notifier: fast})

	d.Send(note("a1", "k1", "hung", "fast"))
	<-entered
	if r := fast.next(t); r.m.Notification.Alert.ID != "a1" || !r.at.Equal(t0) {
		t.Fatalf("fast channel got %+v", r)
	}
	d.Send(note("a2", "k2", "hung", "fast")) // queued behind the hung attempt on "hung" only
	if r := fast.next(t); r.m.Notification.Alert.ID != "a2" || !r.at.Equal(t0) {
		t.Fatalf("fast channel got %+v", r)
	}
	clk.Advance(time.Minute) // the hung attempt times out: retryable
	for {
		a := log.next(t)
		if a.Channel == "hung" {
			if a.Outcome != OutcomeRetrying || !strings.Contains(a.Error, "no answer within 1m0s") {
				t.Fatalf("hung channel: %+v", a)
			}
			break
		}
	}
}

func TestRetryBackoffThenGiveUp(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	calls := 0
	failing := NotifierFunc(func(context.Context, *Message) (bool, error) {
		calls++
		return true, errors.New("POST https://oapi.dingtalk.com/robot/send?access_token=s3cr3t: 500")
	})
	d, err := NewDispatcher([]Channel{{Name: "ding", Notifier: failing, GiveUpAfter: time.Minute}},
		Options{Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	d.randN = func(n int64) int64 { return n - 1 } // always the longest wait
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	d.Send(note("a1", "k1", "ding"))

	// Waits 1s, 2s, 4s, 8s, 16s, 32s: the try at 31s would wait until 63s,
	// past the minute, so it is the last.
	wantAt := []time.Duration{0, 1, 3, 7, 15, 31}
	for i, w := range wantAt {
		a := log.next(t)
		want := OutcomeRetrying
		if i == len(wantAt)-1 {
			want = OutcomeGaveUp
		}
		if a.Outcome != want || a.Try != i+1 || a.At.Sub(t0) != w*time.Second {
			t.Fatalf("attempt %d: %s try %d at %s, want %s at %ds", i+1, a.Outcome, a.Try, a.At.Sub(t0), want, w)
		}
		if strings.Contains(a.Error, "s3cr3t") || !strings.Contains(a.Error, "access_token=REDACTED") {
			t.Fatalf("error not redacted: %q", a.Error)
		}
		if want == OutcomeRetrying {
			if !clk.BlockUntil(1, testwait.Timeout(t)) {
				t.Fatal("no backoff timer armed")
			}
			clk.Advance(backoff(i+1, d.randN))
		}
	}
	st := d.Stats().Channels["ding"]
	if st.Retried != 5 || st.GaveUp != 1 || st.Sent != 0 {
		t.Fatalf("stats %+v", st)
	}
	if calls != 6 {
		t.Fatalf("%d calls, want 6", calls)
	}
}

func TestNonRetryableFailsOnce(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	calls := 0
	bad := NotifierFunc(func(context.Context, *Message) (bool, error) {
		calls++
		return false, errors.New("errcode 310000: keywords not in content")
	})
	d := startDispatcher(t, clk, log, Channel{Name: "ding", Notifier: bad})
	d.Send(note("a1", "k1", "ding"))
	if a := log.next(t); a.Outcome != OutcomeFailed || a.Try != 1 || !strings.Contains(a.Error, "310000") {
		t.Fatalf("%+v", a)
	}
	d.Stop(context.Background())
	if calls != 1 || d.Stats().Channels["ding"].Failed != 1 {
		t.Fatalf("calls %d, stats %+v", calls, d.Stats().Channels["ding"])
	}
}

func TestDropsAreRecorded(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	d, err := NewDispatcher([]Channel{{Name: "ops", Notifier: newSink(clk), QueueSize: 2}}, Options{Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	// Not started: the queue holds two, the third is dropped.
	for i := range 3 {
		d.Send(note("a"+strconv.Itoa(i), "", "ops"))
	}
	if a := log.next(t); a.Outcome != OutcomeDropped || a.Error != "queue full" || a.AlertID != "a2" {
		t.Fatalf("%+v", a)
	}
	d.Send(note("a9", "", "nowhere"))
	if a := log.next(t); a.Outcome != OutcomeDropped || a.Channel != "nowhere" || a.Error != "unknown channel" {
		t.Fatalf("%+v", a)
	}
	d.Stop(context.Background()) // the two queued are dropped, not lost silently
	for range 2 {
		if a := log.next(t); a.Outcome != OutcomeDropped || a.Error != "dispatcher stopped" {
			t.Fatalf("%+v", a)
		}
	}
	d.Send(note("a10", "", "ops"))
	if a := log.next(t); a.Outcome != OutcomeDropped || a.Error != "dispatcher stopped" {
		t.Fatalf("after stop: %+v", a)
	}
	s := d.Stats()
	if s.Channels["ops"].Dropped != 4 || s.Channels["ops"].Queued != 2 || s.UnknownChannel != 1 {
		t.Fatalf("stats %+v", s)
	}
	if err := d.Start(context.Background()); err == nil {
		t.Fatal("start after stop succeeded")
	}
}

func TestStopCancelsInFlightAndIsIdempotent(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	entered := make(chan struct{})
	blocked := NotifierFunc(func(ctx context.Context, _ *Message) (bool, error) {
		close(entered)
		<-ctx.Done()
		return true, ctx.Err()
	})
	d := startDispatcher(t, clk, log, Channel{Name: "ops", Notifier: blocked})
	d.Send(note("a1", "k1", "ops"))
	<-entered
	done := make(chan struct{})
	go func() { d.Stop(context.Background()); d.Stop(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("Stop did not return")
	}
	if a := log.next(t); a.Outcome != OutcomeDropped || !strings.HasPrefix(a.Error, "dispatcher stopped") {
		t.Fatalf("%+v", a)
	}
	if err := d.Start(context.Background()); err == nil {
		t.Fatal("start after stop succeeded")
	}
}

func TestStartTwice(t *testing.T) {
	t.Parallel()
	d := startDispatcher(t, apollo.NewFakeClock(t0), nil, Channel{Name: "ops", Notifier: newSink(apollo.SystemClock)})
	if err := d.Start(context.Background()); err == nil {
		t.Fatal("second start succeeded")
	}
}

func TestTestSendsOneMessage(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	failing := NotifierFunc(func(context.Context, *Message) (bool, error) { return false, errors.New("bad token") })
	d, err := NewDispatcher([]Channel{{Name: "ops", Notifier: s, Lang: "zh-CN"}, {Name: "bad", Notifier: failing}},
		Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Test(context.Background(), "ops")
	if err != nil || a.Outcome != OutcomeSent || a.Channel != "ops" || a.Kind != apollo.NotifyTest {
		t.Fatalf("%+v %v", a, err)
	}
	if r := s.next(t); !strings.Contains(r.m.Title, "测试") {
		t.Fatalf("title %q", r.m.Title)
	}
	a, err = d.Test(context.Background(), "bad")
	if err == nil || a.Outcome != OutcomeFailed || a.Error != "bad token" {
		t.Fatalf("%+v %v", a, err)
	}
	_, err = d.Test(context.Background(), "nope")
	if apollo.ErrorCode(err) != apollo.ENOTFOUND || !strings.Contains(err.Error(), "ops, bad") {
		t.Fatalf("unknown channel: %v", err)
	}
	if got := d.Attempts(AttemptFilter{Channel: "ops"}); len(got) != 1 {
		t.Fatalf("log: %+v", got)
	}
}

// TestFor tests a channel as a tenant: its own channels and the shared
// ones exist for it, another tenant's do not; the message and the
// delivery record carry the tenant.
func TestTestForIsTenantScoped(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	d, err := NewDispatcher([]Channel{{Name: "ops", Notifier: s}, {Name: "a_robot", Notifier: s, Tenants: []string{"a"}},
		{Name: "b_robot", Notifier: s, Tenants: []string{"b"}}, {Name: "all", Notifier: s, Tenants: []string{AllTenants}}},
		Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, channel string
		ok              bool
		known           string // the hint of a refusal
	}{
		{"a", "a_robot", true, ""},
		{"a", "all", true, ""},
		{"a", "b_robot", false, "a_robot, all"},
		{"a", "ops", false, "a_robot, all"},
		{"b", "b_robot", true, ""},
		{"b", "a_robot", false, "b_robot, all"},
		{"", "ops", true, ""},
		{"", "a_robot", false, "ops, all"},
		{"", "nope", false, "ops, all"},
	} {
		a, err := d.TestFor(context.Background(), tc.tenant, tc.channel)
		if !tc.ok {
			if apollo.ErrorCode(err) != apollo.ENOTFOUND || !strings.HasSuffix(err.Error(), "(the channels of this tenant: "+tc.known+")") {
				t.Errorf("tenant %q, channel %s: %v; want not found, listing %s", tc.tenant, tc.channel, err, tc.known)
			}
			continue
		}
		if err != nil || a.Outcome != OutcomeSent || a.Tenant != tc.tenant || a.Channel != tc.channel {
			t.Errorf("tenant %q, channel %s: %+v %v", tc.tenant, tc.channel, a, err)
		}
		if r := s.next(t); r.m.Notification.Alert.Tenant != tc.tenant {
			t.Errorf("tenant %q, channel %s: the message is for tenant %q", tc.tenant, tc.channel, r.m.Notification.Alert.Tenant)
		}
		if got := d.Attempts(AttemptFilter{Tenant: tc.tenant, Channel: tc.channel}); len(got) == 0 || got[0].ID != a.ID {
			t.Errorf("tenant %q, channel %s: not in the tenant's delivery record: %+v", tc.tenant, tc.channel, got)
		}
	}
	if got := d.Attempts(AttemptFilter{Tenant: "b", Channel: "all"}); len(got) != 0 {
		t.Errorf("tenant b sees tenant a's test of the shared channel: %+v", got)
	}
}

func TestNewDispatcherValidates(t *testing.T) {
	t.Parallel()
	n := newSink(apollo.SystemClock)
	for _, tc := range []struct {
		name string
		chs  []Channel
		want []string
	}{
		{"duplicate", []Channel{{Name: "a", Notifier: n}, {Name: "a", Notifier: n}}, []string{"channels.a: two channels"}},
		{"no name", []Channel{{Notifier: n}}, []string{"channels[0].name"}},
		{"no notifier", []Channel{{Name: "a"}}, []string{"channels.a.type"}},
		{"language", []Channel{{Name: "a", Notifier: n, Lang: "fr"}}, []string{"channels.a.lang", `"fr"`}},
		{"negative", []Channel{{Name: "a", Notifier: n, RatePerMinute: -1, QueueSize: -1}},
			[]string{"channels.a.rate_per_minute", "channels.a.queue_size"}},
		{"queue total", []Channel{{Name: "a", Notifier: n, QueueTotal: -1}, {Name: "b", Notifier: n, QueueSize: 50, QueueTotal: 10},
			{Name: "c", Notifier: n, QueueTotal: math.MaxInt64}},
			[]string{"channels.a.queue_total: queue total is negative", "channels.b.queue_total: queue total 10 is below queue_size (50)",
				"channels.c.queue_total: queue total 9223372036854775807 is over"}},
		{"bad template", []Channel{{Name: "a", Notifier: n, Templates: map[apollo.NotificationKind]string{"storm": "{{.Alert.Rule"}}},
			[]string{"channels.a.templates.storm", "does not parse"}},
		{"failing template", []Channel{{Name: "a", Notifier: n, Templates: map[apollo.NotificationKind]string{"firing": "{{.Alert.Nope}}"}}},
			[]string{"channels.a.templates.firing", "fails on a sample alert", "Nope"}},
		{"unknown kind", []Channel{{Name: "a", Notifier: n, Templates: map[apollo.NotificationKind]string{"fire": "x"}}},
			[]string{"channels.a.templates.fire", "firing, resolved"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDispatcher(tc.chs, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if apollo.ErrorCode(err) != apollo.EINVALID {
				t.Errorf("code %q", apollo.ErrorCode(err))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestBackoffIsFullJitter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		try  int
		ceil time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {100, 5 * time.Minute}} {
		var asked int64
		got := backoff(tc.try, func(n int64) int64 { asked = n; return n / 2 })
		if time.Duration(asked) != tc.ceil+1 || got != time.Duration(asked/2) {
			t.Errorf("try %d: drew from [0,%d), want [0,%d]", tc.try, asked, tc.ceil)
		}
		if low := backoff(tc.try, func(int64) int64 { return 0 }); low != 0 {
			t.Errorf("try %d: lowest wait %s, want 0", tc.try, low)
		}
	}
}

func TestMemoryLogRing(t *testing.T) {
	t.Parallel()
	l := NewMemoryLog(3)
	for i := range 5 {
		l.Record(Attempt{ID: strconv.Itoa(i), Channel: []string{"a", "b"}[i%2], AlertID: "x" + strconv.Itoa(i%2)})
	}
	ids := func(as []Attempt) string {
		s := make([]string, len(as))
		for i, a := range as {
			s[i] = a.ID
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		f    AttemptFilter
		want string
	}{
		{AttemptFilter{}, "4,3,2"},
		{AttemptFilter{Limit: 2}, "4,3"},
		{AttemptFilter{Channel: "a"}, "4,2"},
		{AttemptFilter{AlertID: "x1"}, "3"},
	} {
		if got := ids(l.List(tc.f)); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.f, got, tc.want)
		}
	}
}

// Retries reach the server too, so they keep to the channel's pace.
func TestRetriesKeepThePace(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	log := newWatchLog()
	calls := 0
	flaky := NotifierFunc(func(context.Context, *Message) (bool, error) {
		calls++
		if calls < 4 {
			return true, errors.New("errcode 130101: send too fast")
		}
		return false, nil
	})
	d, err := NewDispatcher([]Channel{{Name: "ding", Notifier: flaky, RatePerMinute: 20}}, Options{Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	d.randN = func(int64) int64 { return 0 } // no backoff: only the pace spaces the tries
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	d.Send(note("a1", "k1", "ding"))
	var got []Attempt
	deadline := time.Now().Add(testwait.Timeout(t))
	for len(got) < 4 && time.Now().Before(deadline) {
		select {
		case a := <-log.c:
			got = append(got, a)
		default:
			if clk.BlockUntil(1, 50*time.Millisecond) {
				clk.Advance(500 * time.Millisecond)
			}
		}
	}
	if len(got) != 4 || got[3].Outcome != OutcomeSent {
		t.Fatalf("%+v", got)
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].At.Sub(got[i-1].At); gap < 3*time.Second {
			t.Fatalf("try %d started %s after try %d", i+1, gap, i)
		}
	}
}

// A digest's outcome belongs to the tenants whose notifications it
// carries. A rate-limited channel of team-a folds team-a's notifications
// into a digest: team-a's delivery record must say whether it was sent,
// and the default tenant's must not show team-a's channel at all. A
// shared channel's digest of team-a's and team-b's is in both records.
func TestDigestOutcomeIsRecordedForItsTenants(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	d := startDispatcher(t, clk, NewMemoryLog(1000),
		Channel{Name: "a-ding", Notifier: s, RatePerMinute: 20, Tenants: []string{"team-a"}},
		Channel{Name: "shared", Notifier: s, RatePerMinute: 20, Tenants: []string{AllTenants}})
	for _, ch := range []struct{ name, first string }{{"a-ding", "team-a"}, {"shared", "team-b"}} {
		d.Send(chNote("first-"+ch.name, ch.first, ch.name))
		if m := s.next(t).m; len(m.Digest) != 0 {
			t.Fatalf("first message on %s is a digest", ch.name)
		}
	}
	d.Send(chNote("a1", "team-a", "a-ding"))
	d.Send(chNote("a2", "team-a", "a-ding"))
	d.Send(chNote("a3", "team-a", "shared"))
	d.Send(chNote("b1", "team-b", "shared"))
	waitQueueEmpty(t, d.lanes["a-ding"])
	waitQueueEmpty(t, d.lanes["shared"])
	clk.Advance(time.Minute)
	for range 2 {
		if m := s.next(t).m; len(m.Digest) != 2 {
			t.Fatalf("a message of %d notifications, want a digest of 2", len(m.Digest))
		}
	}
	d.Stop(context.Background())

	digests := func(tenant string) map[string]string {
		got := map[string]string{}
		for _, a := range d.Attempts(AttemptFilter{Tenant: tenant}) {
			if a.Kind == KindDigest {
				got[a.Channel] = a.Outcome
			}
		}
		return got
	}
	for tenant, want := range map[string]string{"team-a": "a-ding:sent shared:sent", "team-b": "shared:sent", "": ""} {
		got := digests(tenant)
		var s []string
		for _, ch := range []string{"a-ding", "shared"} {
			if o, ok := got[ch]; ok {
				s = append(s, ch+":"+o)
			}
		}
		if strings.Join(s, " ") != want {
			t.Errorf("tenant %q's record of digests: %q, want %q", tenant, strings.Join(s, " "), want)
		}
	}
	if st := d.Stats().Channels["shared"]; st.Sent != 2 {
		t.Errorf("shared counts %d sent, want 2 (the first message and one digest)", st.Sent)
	}
}

func chNote(id, tenant, channel string) apollo.Notification {
	n := note(id, "k-"+id, channel)
	n.Alert.Tenant = tenant
	return n
}

// A test message takes its turn under the channel's rate limit, as the
// documentation says. It used to go out at once however many came before
// it, so that an operator of one tenant testing a shared DingTalk robot a
// few times in a row pushed it past 20 a minute, and DingTalk mutes a
// robot for ten minutes past that: every tenant's alerts on it with it.
func TestTestKeepsTheRateLimit(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	d := startDispatcher(t, clk, NewMemoryLog(100),
		Channel{Name: "ding", Notifier: s, RatePerMinute: 1, Tenants: []string{AllTenants}})
	if a, err := d.TestFor(context.Background(), "team-a", "ding"); err != nil || a.Outcome != OutcomeSent {
		t.Fatalf("first test: %+v %v", a, err)
	}
	first := s.next(t)
	done := make(chan error, 1)
	go func() {
		_, err := d.TestFor(context.Background(), "team-b", "ding")
		done <- err
	}()
	waitWaiting := func(which string) {
		t.Helper()
		deadline := time.Now().Add(testwait.Timeout(t))
		for !clk.BlockUntil(1, 10*time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("the %s test did not wait for the rate limit (err %v)", which, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the %s test neither waited on the clock nor returned", which)
			}
		}
	}
	waitWaiting("second")
	if n := len(s.all()); n != 1 {
		t.Fatalf("%d messages before the turn came", n)
	}
	clk.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if second := s.next(t); second.at.Sub(first.at) < time.Minute {
		t.Fatalf("two tests %v apart on a channel of 1 a minute", second.at.Sub(first.at))
	}
	// A test whose caller gives up while it waits is not sent.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := d.TestFor(ctx, "team-c", "ding")
		done <- err
	}()
	waitWaiting("third")
	cancel()
	if err := <-done; apollo.ErrorCode(err) != apollo.ETOOMANY {
		t.Fatalf("a test given up while waiting: %v, want %s", err, apollo.ETOOMANY)
	}
	if n := len(s.all()); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
}

// turnsFunc is a Turns of a function.
type turnsFunc func(channel string, every time.Duration, now time.Time) (time.Duration, error)

func (f turnsFunc) Take(_ context.Context, channel string, every time.Duration, now time.Time) (time.Duration, error) {
	return f(channel, every, now)
}

// Turns that cannot be read (Redis down) never hold a notification back:
// the lane keeps its own pace alone.
func TestTurnsThatFailKeepTheLanesOwnPace(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	d, err := NewDispatcher([]Channel{{Name: "ding", Notifier: s, RatePerMinute: 20}}, Options{Clock: clk, Location: time.UTC,
		Turns: turnsFunc(func(string, time.Duration, time.Time) (time.Duration, error) {
			return 0, errors.New("redis: connection refused")
		})})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	d.Send(note("a1", "k1", "ding"))
	if r := s.next(t); !r.at.Equal(t0) {
		t.Fatalf("sent at %s", r.at)
	}
	d.Send(note("a2", "k2", "ding"))
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the second did not wait for the lane's own turn")
	}
	clk.Advance(3 * time.Second)
	if r := s.next(t); r.at.Sub(t0) != 3*time.Second {
		t.Fatalf("second sent %s after the first, want 3s", r.at.Sub(t0))
	}
}

// One tenant's storm on a channel that cannot keep up (every notification
// dropped, queue full, and recorded) does not push another tenant's
// record out of the delivery record: each tenant keeps its last
// DefaultLogSize attempts.
func TestOneTenantsStormKeepsAnothersRecord(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	started := make(chan string, 10)
	slow := NotifierFunc(func(ctx context.Context, m *Message) (bool, error) {
		started <- m.Notification.Alert.Tenant
		if m.Notification.Alert.Tenant == "team-a" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return false, nil
	})
	d, err := NewDispatcher([]Channel{{Name: "mail", Notifier: slow, QueueSize: 1, Tenants: []string{AllTenants}}}, Options{Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	send := func(tenant string, i int) {
		n := note(tenant+strconv.Itoa(i), "k"+strconv.Itoa(i), "mail")
		n.Alert.Tenant = tenant
		d.Send(n)
	}
	send("team-b", 0)
	<-started
	deadline := time.Now().Add(testwait.Timeout(t))
	for len(d.Attempts(AttemptFilter{Tenant: "team-b"})) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("team-b's message was never recorded")
		}
		runtime.Gosched()
	}
	send("team-a", 0)
	<-started // team-a's first holds the lane; the next fills the queue
	for i := 1; i <= DefaultLogSize+10; i++ {
		send("team-a", i)
	}
	if got := d.Attempts(AttemptFilter{Tenant: "team-b"}); len(got) != 1 || got[0].Outcome != OutcomeSent {
		t.Fatalf("team-b's delivery record after team-a's storm: %+v", got)
	}
	if got := d.Attempts(AttemptFilter{Tenant: "team-a", Limit: DefaultLogSize + 100}); len(got) != DefaultLogSize {
		t.Fatalf("team-a's record holds %d attempts, want its last %d", len(got), DefaultLogSize)
	}
}

// A tenant's tests on a channel with a rate limit take at most one turn
// every testEvery (5 minutes on a channel of one a minute): the next is
// refused at once, without waiting for a turn, and another tenant's is not.
func TestATenantsTestsHaveABudgetOfTheirOwn(t *testing.T) {
	t.Parallel()
	clk := apollo.NewFakeClock(t0)
	s := newSink(clk)
	d := startDispatcher(t, clk, NewMemoryLog(100),
		Channel{Name: "ding", Notifier: s, RatePerMinute: 1, Tenants: []string{AllTenants}})
	if _, err := d.TestFor(context.Background(), "team-a", "ding"); err != nil {
		t.Fatal(err)
	}
	s.next(t)
	clk.Advance(time.Minute)
	_, err := d.TestFor(context.Background(), "team-a", "ding")
	if e, ok := errors.AsType[*apollo.Error](err); !ok || e.Code != apollo.ETOOMANY || !strings.Contains(e.Message, "one test message every 5m0s") {
		t.Fatalf("team-a's second test a minute later: %v; want too_many at once", err)
	}
	if _, err := d.TestFor(context.Background(), "team-b", "ding"); err != nil {
		t.Fatalf("team-b's test: %v", err)
	}
	clk.Advance(5 * time.Minute)
	if _, err := d.TestFor(context.Background(), "team-a", "ding"); err != nil {
		t.Fatalf("team-a's test past its budget's time: %v", err)
	}
	if n := len(s.all()); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
}
