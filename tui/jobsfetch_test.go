package tui

import (
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// The table of every job (GET /api/v1/metrics, page after page) is read
// when the Jobs tab opens and while it shows; not at start nor at each
// refresh on another tab. At 100 000 jobs each read is 11 pages, 23 MB:
// every 10 s, for a tab nobody looked at, it cost the server about a
// twentieth of a core and the terminal a tenth and 200 MB.
func TestJobsReadOnlyWhileTheirTabShows(t *testing.T) {
	t.Parallel()
	fs := newFakeServer(t)
	m, err := New(Options{Server: fs.srv.URL, Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	fs.accept().send(helloJSON("c.1"))
	w.untilText(t, "● live")

	// seen counts the requests by route; until waits for n of route.
	seen := map[string]int{}
	until := func(route string, n int) {
		t.Helper()
		deadline := time.After(testwait.Timeout(t))
		for seen[route] < n {
			select {
			case r := <-fs.reqs:
				seen[r.method+" "+r.path]++
			case <-deadline:
				t.Fatalf("%d requests %s, want %d", seen[route], route, n)
			}
		}
	}
	// At start, on the hello and at a refresh, on the Health tab: the
	// silences are read each time, with the jobs before.
	until("GET /api/v1/silences", 2)
	tm.Send(refreshMsg{})
	until("GET /api/v1/silences", 3)
	if n := seen["GET /api/v1/metrics"]; n > 0 {
		t.Errorf("the jobs were read %d times on the Health tab", n)
	}
	tm.Send(keyMsg("3"))
	w.untilText(t, "batch_orders")
	tm.Send(refreshMsg{})
	until("GET /api/v1/silences", 4)
	until("GET /api/v1/metrics", 2)
	reads := seen["GET /api/v1/metrics"]
	if reads != 2 {
		t.Errorf("the jobs were read %d times, want twice: when their tab opened and at the refresh while it showed", reads)
	}
}
