package redisstore_test

import (
	"context"
	"slices"
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
	stop, err := redisstore.SubscribeFindings(ctx, c, prefix, func(o alert.Occurrence) { got <- o })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
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
