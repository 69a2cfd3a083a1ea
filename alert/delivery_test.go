package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/webhook"
)

// webhookDispatcher is a started dispatcher with one webhook channel,
// "hook", in lang, open to every tenant, and the bodies its endpoint gets.
func webhookDispatcher(t *testing.T, clock apollo.Clock, lang string) (*notify.Dispatcher, <-chan webhook.ApolloPayload) {
	t.Helper()
	disp, got, _ := webhookDispatcherLogged(t, clock, lang)
	return disp, got
}

// signalLog is the dispatcher's attempt log, which also hands each attempt
// to C once it is recorded: the call is over, its outcome known.
type signalLog struct {
	notify.AttemptLog
	C chan notify.Attempt
}

func (l signalLog) Record(a notify.Attempt) { l.AttemptLog.Record(a); l.C <- a }

// webhookDispatcherLogged is webhookDispatcher with the attempts as they
// end, for a test that moves a fake clock: moving it while a call is in
// flight would pass the call's timeout on that clock.
func webhookDispatcherLogged(t *testing.T, clock apollo.Clock, lang string) (*notify.Dispatcher, <-chan webhook.ApolloPayload, <-chan notify.Attempt) {
	t.Helper()
	log := signalLog{notify.NewMemoryLog(100), make(chan notify.Attempt, 100)}
	url, got := receiver(t)
	hook, err := webhook.New(webhook.Config{URL: notify.SecretURL(url)}, notify.NotifierOptions{Name: "hook"})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := notify.NewDispatcher([]notify.Channel{{Name: "hook", Type: notify.TypeWebhook, Notifier: hook, Lang: lang,
		Tenants: []string{notify.AllTenants}}}, notify.Options{Clock: clock, Logger: quiet, Location: time.UTC, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(bg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disp.Stop(context.Background()) })
	return disp, got, log.C
}

// receiver is a webhook endpoint that hands every body it gets to C.
func receiver(t *testing.T) (url string, c <-chan webhook.ApolloPayload) {
	t.Helper()
	ch := make(chan webhook.ApolloPayload, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p webhook.ApolloPayload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body %q: %v", b, err)
		}
		ch <- p
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

// Duplicates are removed in one stage, the engine's dedup lock, and it is
// keyed by tenant: two tenants whose same rule matches at the same moment
// both hear of it through the real dispatcher and a webhook, while two
// engines sharing the lock still send each tenant's notification once.
func TestSameRuleTwoTenantsBothDelivered(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	disp, got := webhookDispatcher(t, clock, notify.LangEnglish)
	rule := parse(t, `RULE batch_failed task_prefix: "batch_" ON: failed NOTIFY: hook`)
	locker := alert.NewMemoryLocker(clock)
	var engines []*alert.Engine
	for range 2 {
		e, err := alert.New(alert.Options{Store: newTable(), Sender: disp, Locker: locker, Clock: clock, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		e.SetRules("team-a", rule)
		e.SetRules("team-b", rule)
		if err := e.Start(bg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Stop(context.Background()) })
		engines = append(engines, e)
	}
	ts := clock.Now().UnixMilli()
	for _, e := range engines {
		for _, tenant := range []string{"team-a", "team-b"} {
			c := finish(nil, tenant, "batch_load", "run-1", apollo.StatusFailed, ts, 5)
			e.Apply(&c)
		}
	}
	var deduped int64
	for _, e := range engines {
		e.Stop(context.Background()) // every notification is with the dispatcher now
		deduped += e.Stats().Deduped
	}
	if q := disp.Stats().Channels["hook"].Queued; q != 2 || deduped != 2 {
		t.Fatalf("the engines handed %d notifications to the dispatcher and deduplicated %d; want 2 and 2", q, deduped)
	}
	var tenants []string
	for len(tenants) < 2 {
		select {
		case p := <-got:
			tenants = append(tenants, p.Alert.Tenant)
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("the webhook got %v, want one notification per tenant; attempts %+v", tenants,
				disp.Attempts(notify.AttemptFilter{Tenant: "team-b"}))
		}
	}
	slices.Sort(tenants)
	if !slices.Equal(tenants, []string{"team-a", "team-b"}) {
		t.Fatalf("the webhook got notifications of %v", tenants)
	}
}

// A storm's follow-up on a zh-CN channel is written in Chinese from end to
// end: the engine hands the counts over, the channel's templates write the
// sentence (it once came from the engine in English: "2 more after the
// first within 1m").
func TestStormFollowUpInChinese(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	disp, got, attempts := webhookDispatcherLogged(t, clock, notify.LangChinese)
	eng, err := alert.New(alert.Options{Rules: parse(t, `RULE storm task_prefix: "批处理_" ON: failed GROUP_WINDOW: 1m NOTIFY: hook`),
		Store: newTable(), Sender: disp, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	fail := func(run string) {
		c := finish(nil, "", "批处理_甲", run, apollo.StatusFailed, clock.Now().UnixMilli(), 5)
		eng.Apply(&c)
	}
	for _, run := range []string{"r1", "r2", "r3"} {
		fail(run)
	}
	next := func(want apollo.NotificationKind) webhook.ApolloPayload {
		t.Helper()
		select {
		case p := <-got:
			if p.Kind != want {
				t.Fatalf("got %s, want %s", p.Kind, want)
			}
			return p
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("no %s message", want)
		}
		panic("unreachable")
	}
	// The first message's call is over before the clock moves: moving it
	// while the call is in flight would pass the call's timeout on the fake
	// clock and leave its retry waiting for a minute that never comes.
	next(apollo.NotifyFiring)
	select {
	case a := <-attempts:
		if a.Kind != apollo.NotifyFiring || a.Outcome != notify.OutcomeSent {
			t.Fatalf("the first attempt: %+v", a)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the firing message's call never ended")
	}
	// The window ends; the next failure, or the group timer, tells the two
	// after the first.
	clock.Advance(time.Minute)
	fail("r4")
	if p := next(apollo.NotifyStorm); !strings.Contains(p.Text, "又命中 2 次，1分钟内共 3 次") || strings.Contains(p.Text, "more") {
		t.Fatalf("follow-up:\n%s", p.Text)
	}
}
