package loglimit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/loglimit"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// call is one Allow and what it must answer.
type call struct {
	key        string
	at         time.Duration // after t0
	ok         bool
	suppressed int
}

func TestAllow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"the first line goes through", []call{{"a", 0, true, 0}}},
		{"lines within the period are held back and counted", []call{
			{"a", 0, true, 0}, {"a", time.Millisecond, false, 0}, {"a", 9 * time.Second, false, 0},
			{"a", 10 * time.Second, true, 2}, {"a", 11 * time.Second, false, 0}, {"a", 20 * time.Second, true, 1},
		}},
		{"the count starts again after a line", []call{
			{"a", 0, true, 0}, {"a", time.Second, false, 0}, {"a", 10 * time.Second, true, 1}, {"a", 30 * time.Second, true, 0},
		}},
		{"keys are limited apart", []call{
			{"a", 0, true, 0}, {"b", time.Second, true, 0}, {"a", 2 * time.Second, false, 0},
			{"b", 3 * time.Second, false, 0}, {"b", 4 * time.Second, false, 0},
			{"a", 10 * time.Second, true, 1}, {"b", 11 * time.Second, true, 2},
		}},
		{"a clock that goes back holds lines back", []call{
			{"a", 10 * time.Second, true, 0}, {"a", 0, false, 0}, {"a", 20 * time.Second, true, 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := loglimit.New(10 * time.Second)
			for i, c := range tc.calls {
				ok, n := l.Allow(c.key, t0.Add(c.at))
				if ok != c.ok || n != c.suppressed {
					t.Fatalf("call %d (%q at +%v) = %v, %d; want %v, %d", i, c.key, c.at, ok, n, c.ok, c.suppressed)
				}
			}
		})
	}
}

// TestAllowConcurrent: every line offered is either let through or
// counted in a later line's suppressed, however many goroutines log.
func TestAllowConcurrent(t *testing.T) {
	t.Parallel()
	const goroutines, each = 8, 1000
	l := loglimit.New(time.Second)
	var (
		mu           sync.Mutex
		let, counted int
		wg           sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				// Time moves a millisecond per line of this goroutine: some
				// lines cross a period's end, most do not.
				ok, n := l.Allow("k", t0.Add(time.Duration(i+g)*time.Millisecond))
				if ok {
					mu.Lock()
					let, counted = let+1, counted+n
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// The lines held back since the last one that went through are
	// counted by the next: one more line far ahead collects them.
	_, rest := l.Allow("k", t0.Add(time.Hour))
	if got := let + counted + rest; got != goroutines*each {
		t.Fatalf("%d lines let through, %d counted as suppressed, %d still held: %d in all, want %d",
			let, counted, rest, got, goroutines*each)
	}
}

func ExampleLimiter() {
	l := loglimit.New(time.Minute)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		if ok, n := l.Allow("lock", now.Add(time.Duration(i)*20*time.Second)); ok {
			fmt.Println("dedup lock failed; suppressed", n)
		}
	}
	// Output:
	// dedup lock failed; suppressed 0
	// dedup lock failed; suppressed 2
}
