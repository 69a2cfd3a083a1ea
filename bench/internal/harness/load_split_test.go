package harness

import (
	"testing"
	"time"
)

func TestTakeEventsCutsAtTheLimit(t *testing.T) {
	at := time.Unix(0, 0)
	ds := []due{{0, 4000, at}, {4000, 4000, at}, {8000, 4000, at}, {12000, 25000, at}}
	var got [][2]int64 // first, n of every request, in order
	var sizes []int
	for todo := ds; len(todo) > 0; {
		var req []due
		req, todo = takeEvents(todo, 10_000)
		n := 0
		for _, d := range req {
			got = append(got, [2]int64{d.first, int64(d.n)})
			n += d.n
		}
		sizes = append(sizes, n)
	}
	want := []int{10_000, 10_000, 10_000, 7000}
	if len(sizes) != len(want) {
		t.Fatalf("requests of %v events, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("requests of %v events, want %v", sizes, want)
		}
	}
	// Every event once, in order.
	next := int64(0)
	for _, g := range got {
		if g[0] != next {
			t.Fatalf("pieces %v: a gap or overlap at %d", got, next)
		}
		next += g[1]
	}
	if next != 37000 {
		t.Fatalf("pieces %v cover %d events, want 37000", got, next)
	}
}
