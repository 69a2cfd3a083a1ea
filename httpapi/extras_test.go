package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

// Issue 20.2: the extras of a request's events are copied into one chunk
// (a few for a large body), not one allocation each; each event's extra is
// its own, intact, and capped so that appending to one cannot reach the
// next.
func TestExtrasShareAllocations(t *testing.T) {
	const n = 100
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"taskID":"t-%03d","name":"nightly","sequence":1,"status":"pending","ts":1764000000000,"extra":{"host":"w%d","try":%d}}`, i, i, i%3)
	}
	b.WriteByte(']')
	body := []byte(b.String())
	evs, bad, err := decodeEventsInto(nil, nil, body, false, 1000)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		evs, bad, err = decodeEventsInto(evs, bad, body, false, 1000)
	})
	t.Logf("%d events with extras: %.1f allocations per request", n, allocs)
	// Each event's task ID is its own string; the name is one copy.
	if allocs > n+10 {
		t.Errorf("%.0f allocations for %d events with extras, over %d: each extra is allocated on its own", allocs, n, n+10)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if bad[i] != nil {
			t.Fatalf("event %d: %v", i, bad[i])
		}
		want := fmt.Sprintf(`{"host":"w%d","try":%d}`, i, i%3)
		if got := string(evs[i].Extra); got != want || cap(evs[i].Extra) != len(evs[i].Extra) {
			t.Fatalf("event %d: extra %q (cap %d), want %q capped at its end", i, got, cap(evs[i].Extra), want)
		}
	}
	evs[0].Extra = append(evs[0].Extra, "garbage"...)
	if got, want := string(evs[1].Extra), `{"host":"w1","try":1}`; got != want {
		t.Fatalf("appending to the first extra changed the second: %q, want %q", got, want)
	}
}
