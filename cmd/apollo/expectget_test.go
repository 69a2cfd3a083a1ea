package main

import (
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// A GET of a tenant's expectations costs about the file it answers with.
// Before, each GET checked the whole file again to count it: a file of
// 4 MiB cost every reader some 150 MB and seconds of a core. The other
// tenant's count is its own. Not parallel: the figure is the process's.
func TestReadingExpectationsDoesNotCheckThemAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("checks a file of 4 MiB")
	}
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	x, err := newExpectations("", alert.NewFileRules(t.TempDir()+"/expectations"), time.Second, clock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50_000
	big := bigExpectations(n)
	if err := x.put(t.Context(), "acme", big); err != nil {
		t.Fatal(err)
	}
	if err := x.put(t.Context(), "beta", []byte("expectations:\n  - {job: b, every: 1h}\n")); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := x.Expectations("acme")
	runtime.ReadMemStats(&after)
	if got.Count != n || got.Source != string(big) {
		t.Fatalf("acme: %d expectations, want %d", got.Count, n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*uint64(len(big)) {
		t.Errorf("a GET of %d bytes allocated %d bytes (%.0f times the file)", len(big), alloc, float64(alloc)/float64(len(big)))
	}
	if got := x.Expectations("beta"); got.Count != 1 {
		t.Errorf("beta: %d expectations, want 1", got.Count)
	}
}
