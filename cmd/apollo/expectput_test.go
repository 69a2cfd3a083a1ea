package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// gatedRules is a RuleStore whose first Save, once written, waits until
// let is closed before it returns (a slow fsync, a slow Redis), and that
// says when a later Save begins.
type gatedRules struct {
	alert.RuleStore
	calls      int
	mu         sync.Mutex
	firstSaved chan struct{}
	let        chan struct{}
	nextBegins chan struct{}
}

func (g *gatedRules) Save(ctx context.Context, tenant string, src []byte) error {
	g.mu.Lock()
	g.calls++
	n := g.calls
	g.mu.Unlock()
	if n == 2 {
		close(g.nextBegins)
	}
	err := g.RuleStore.Save(ctx, tenant, src)
	if n == 1 {
		close(g.firstSaved)
		<-g.let
	}
	return err
}

// Two PUTs of one tenant's expectations at once: the set in force is the
// one saved last, so a restart puts in force what was in force before it
// (invariant 9). Before, the save and the putting in force were apart: a
// second PUT could be saved and put in force while the first, saved
// before it, had yet to be put in force, and then it was, over the second.
func TestConcurrentExpectationPutsAgreeWithTheSaved(t *testing.T) {
	t.Parallel()
	store := &gatedRules{RuleStore: alert.NewFileRules(t.TempDir() + "/expectations"),
		firstSaved: make(chan struct{}), let: make(chan struct{}), nextBegins: make(chan struct{})}
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	x, err := newExpectations("", store, time.Second, clock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	x.arm()
	first := "expectations:\n  - job: a\n    every: 5m\n"
	second := "expectations:\n  - job: b\n    every: 1h\n"
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { errA <- x.put(t.Context(), "acme", []byte(first)) }()
	<-store.firstSaved // the first is saved, not yet in force
	go func() { errB <- x.put(t.Context(), "acme", []byte(second)) }()
	select {
	case <-store.nextBegins:
		// The second reached the store while the first was not in force:
		// let it finish first, as a fast save would.
		if err := <-errB; err != nil {
			t.Fatal(err)
		}
		close(store.let)
	case <-time.After(time.Second): // the second waits for the first
		close(store.let)
		if err := <-errB; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	saved, err := store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Expectations("acme").Source; got != string(saved["acme"]) {
		t.Fatalf("in force:\n%s\nsaved, what a restart puts in force:\n%s", got, saved["acme"])
	}
}
