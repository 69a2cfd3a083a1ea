package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A mark, a timeout or a missed run the log refused because it failed
// (the server then stops, and must restart to recover) is kept: the
// snapshot taken after it still holds the finding, and the next start
// marks the run, times the other out and records the missed run, in each
// tenant; the mark's finding is not told before it is marked. Before, the
// finding was forgotten as if marked, the run found too long was watched
// no more, and the missed run's slot counted as judged: the snapshot kept
// none of them, and the log after it did not give them again, so they
// were lost for good.
func TestFindingsTheLogRefusedAreKeptForTheNextStart(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	saved := alert.NewFileRules(filepath.Join(t.TempDir(), "expectations"))
	open := func(clock apollo.Clock) *expectations {
		x, err := newExpectations("", saved, time.Second, clock, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	await := func(what string, b *fakeExpectBus, got func(*fakeExpectBus) []string, want []string) {
		t.Helper()
		eventually(t, testwait.Timeout(t), what, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return slices.Equal(slices.Sorted(slices.Values(got(b))), want)
		})
	}
	refused := func(b *fakeExpectBus) []string { return b.refused }

	clock := apollo.NewFakeClock(t0)
	x := open(clock)
	x.arm()
	for _, tenant := range tenants {
		if err := x.put(context.Background(), tenant, []byte("expectations:\n  - job: j\n    max_runtime: 1m\n    min_runtime: 10s\n  - {job: k, every: 1m, grace: 10s}\n")); err != nil {
			t.Fatal(err)
		}
	}
	failed := &fakeExpectBus{failed: true}
	occ := make(chan alert.Occurrence, 10)
	if err := x.start(failed, func(o alert.Occurrence) { occ <- o }, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.stopLoop)
	for _, tenant := range tenants {
		x.Apply(change(tenant, "j", "quick", apollo.StatusNone, apollo.StatusSuccess, t0, t0.Add(2*time.Second)))
		x.Apply(change(tenant, "j", "slow", apollo.StatusPending, apollo.StatusRunning, t0, time.Time{}))
	}
	await("both marks refused", failed, refused, []string{"acme/quick too_short", "globex/quick too_short"})
	if !clock.BlockUntil(2, testwait.Timeout(t)) { // the loop's tickers
		t.Fatal("the loop did not start")
	}
	clock.Advance(2 * time.Minute) // past max_runtime
	await("both timeouts and missed runs refused", failed, refused,
		[]string{"acme/k missed", "acme/quick too_short", "acme/slow timeout", "globex/k missed", "globex/quick too_short", "globex/slow timeout"})
	x.stopLoop()
	if len(occ) != 0 {
		t.Fatalf("told before it was marked: %+v", <-occ)
	}
	var state, snap bytes.Buffer
	if err := x.writeState(&state); err != nil {
		t.Fatal(err)
	}
	if err := x.writeFound(&snap); err != nil {
		t.Fatal(err)
	}

	// The restart.
	clock = apollo.NewFakeClock(t0.Add(3 * time.Minute))
	y := open(clock)
	if err := y.readState(&state); err != nil {
		t.Fatal(err)
	}
	if err := y.readFound(&snap); err != nil {
		t.Fatal(err)
	}
	y.arm()
	b := &fakeExpectBus{}
	if err := y.start(b, func(alert.Occurrence) {}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(y.stopLoop)
	await("both runs marked after the restart", b, func(b *fakeExpectBus) []string { return b.marked },
		[]string{"acme/quick too_short: succeeded in 2s, under min_runtime 10s", "globex/quick too_short: succeeded in 2s, under min_runtime 10s"})
	if !clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the loop did not start after the restart")
	}
	clock.Advance(time.Second)
	await("both runs timed out after the restart", b, func(b *fakeExpectBus) []string { return b.timedOut }, []string{"acme/slow", "globex/slow"})
	await("both missed runs recorded after the restart", b, func(b *fakeExpectBus) []string {
		var jobs []string
		for _, m := range b.missed {
			jobs = append(jobs, m[:strings.Index(m, "@")])
		}
		return jobs
	}, []string{"acme/k", "globex/k"})
}
