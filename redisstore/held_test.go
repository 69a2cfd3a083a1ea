package redisstore_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
	"github.com/apollo-11/apollo/rules"
)

// The held jobs the bus process saves reach every alert process: one that
// watched before (through the channel) and one that starts after (from
// the key), per tenant; a later save replaces them.
func TestHeldJobsReachTheAlertProcesses(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := testwait.Context(t)
	var early redisstore.Holder
	stop, err := early.Watch(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got := early.HeldBy("acme", "load"); got != nil {
		t.Fatalf("held before anything was saved: %v", got)
	}
	first := redisstore.Held{"acme": {"load": {"extract"}}, "": {"report": {"report"}}}
	if err := redisstore.SaveHeld(ctx, c, prefix, first); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, &early, "acme", "load", []string{"extract"})
	var late redisstore.Holder
	stop2, err := late.Watch(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	for _, h := range []*redisstore.Holder{&early, &late} {
		if got := h.HeldBy("acme", "load"); !slices.Equal(got, []string{"extract"}) {
			t.Fatalf("acme's load held by %v", got)
		}
		if got := h.HeldBy("", "load"); got != nil {
			t.Fatalf("the default tenant's load held by %v: tenants mixed", got)
		}
		if got := h.HeldBy("", "report"); !slices.Equal(got, []string{"report"}) {
			t.Fatalf("the default tenant's report held by %v", got)
		}
	}
	if err := redisstore.SaveHeld(ctx, c, prefix, redisstore.Held{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*redisstore.Holder{&early, &late} {
		waitHeld(t, h, "acme", "load", nil)
	}
	if !first.Equal(redisstore.Held{"": {"report": {"report"}}, "acme": {"load": {"extract"}}}) || first.Equal(redisstore.Held{}) {
		t.Fatal("Held.Equal")
	}
}

// waitHeld waits for the holder to hold tenant's job by want, woken by
// each change it takes.
func waitHeld(t *testing.T, h *redisstore.Holder, tenant, job string, want []string) {
	t.Helper()
	timeout := time.NewTimer(testwait.Timeout(t))
	defer timeout.Stop()
	for {
		changed := h.Changed()
		if slices.Equal(h.HeldBy(tenant, job), want) {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("%s/%s held by %v, want %v", tenant, job, h.HeldBy(tenant, job), want)
		}
	}
}

// A finding the bus process publishes reaches a subscribed alert process
// as the occurrence it was, tenant and all.
func TestFindingsReachTheAlertProcesses(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(testwait.Context(t))
	defer cancel()
	got := make(chan alert.Occurrence, 1)
	sub, err := redisstore.SubscribeFindings(ctx, c, prefix, nil, func(o alert.Occurrence) { got <- o })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	at := time.UnixMilli(1_800_000_000_000)
	want := alert.Occurrence{Tenant: "acme", Job: "etl", Kind: rules.OccurrenceFlapping, At: at, Detail: "4 switches within 1h"}
	if err := redisstore.PublishFinding(ctx, c, prefix, want); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-got:
		if o.Tenant != want.Tenant || o.Job != want.Job || o.Kind != want.Kind || !o.At.Equal(at) || o.Detail != want.Detail {
			t.Fatalf("%+v, want %+v", o, want)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the finding did not arrive")
	}
}

// A bus of a newer release publishes a finding of a kind this release
// does not know, among known ones of two tenants: the subscription
// passes over that one alone, logs the first such (tenant, job, run and
// why) and counts every one, as the change log's follower does; a
// payload that is not JSON at all is passed over and counted too; a
// finding in the change log as well ("x") is passed over uncounted (the
// follower counts it there). Before, the unknown kind was dropped
// without a word or a count.
func TestFindingOfAnUnknownKindIsCounted(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(testwait.Context(t))
	defer cancel()
	var logs redisstore.LockedLog
	log := slog.New(slog.NewTextHandler(&logs, nil))
	got := make(chan alert.Occurrence, 10)
	sub, err := redisstore.SubscribeFindings(ctx, c, prefix, log, func(o alert.Occurrence) { got <- o })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	for _, payload := range []string{
		`{"t":"acme","j":"etl","k":"flapping","at":1,"d":"3 switches"}`,
		`{"t":"acme","j":"etl","k":"paused_again","r":"etl-7","at":2}`,
		`{"t":"globex","j":"etl","k":"paused_again","at":3,"x":true}`,
		`not json`,
		`{"t":"globex","j":"etl","k":"too_short","r":"etl-9","at":4}`,
	} {
		if err := c.Publish(ctx, prefix+":findings", payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"acme flapping", "globex too_short"} {
		select {
		case o := <-got:
			if s := o.Tenant + " " + o.Kind.String(); s != want {
				t.Fatalf("heard %+v, want %s", o, want)
			}
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("%s not heard", want)
		}
	}
	// The last finding was heard: every one before it was handled.
	if n := sub.Stats().PassedOver; n != 2 {
		t.Fatalf("%d findings counted as passed over, want 2", n)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, `tenant=acme job=etl run=etl-7 why="kind \"paused_again\""`) ||
		!strings.Contains(out, "findings.passedOver") {
		t.Fatalf("the log says:\n%s\nwant one warning naming the first finding passed over and where the rest are counted", out)
	}
}
