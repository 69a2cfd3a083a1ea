package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

func TestRetryableStatusesAreRetried(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 502, 503, 504, 408, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := newProtocolServer(t)
			srv.failNext(1, status, 0)
			fc := apollo.NewFakeClock(t0)
			hook, waits := retryWaits()
			c := newTestClient(t, srv.URL(), WithClock(fc), noJitter, hook)
			c.Task("r", "").Running()
			flushed := flushAsync(c)
			if r := srv.next(t); r.status != status {
				t.Fatalf("first answer %d", r.status)
			}
			retry(t, fc, waits, backoffBase)
			if r := srv.next(t); r.status != http.StatusOK || len(r.events) != 1 {
				t.Fatalf("resend: %+v", r)
			}
			if err := wait(t, flushed); err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); st.Retries != 1 || st.Accepted != 1 || st.Sent != 2 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestRefusedRequestsAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 403, 404, 415} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := newProtocolServer(t)
			srv.failNext(1, status, 0)
			fc := apollo.NewFakeClock(t0)
			c := newTestClient(t, srv.URL(), WithClock(fc))
			c.Task("a", "").Running()
			c.Task("b", "").Running()
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); st.Rejected != 2 || st.Retries != 0 || st.Sent != 2 {
				t.Fatalf("stats %+v", st)
			}
			if n := len(srv.requests); n != 1 || fc.Waiters() != 0 {
				t.Fatalf("%d requests and %d timers after a refused request, want 1 and 0", n, fc.Waiters())
			}
		})
	}
}

func TestTokenIsSent(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.token = "s3cret"
	bad := newTestClient(t, srv.URL(), WithToken("wrong"))
	bad.Task("x", "").Running()
	bad.Flush(context.Background())
	good := newTestClient(t, srv.URL(), WithToken("s3cret"))
	good.Task("x", "").Running()
	good.Flush(context.Background())
	if b, g := bad.Stats(), good.Stats(); b.Rejected != 1 || g.Accepted != 1 {
		t.Fatalf("wrong token: %+v; right token: %+v", b, g)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.failNext(1, http.StatusTooManyRequests, 3)
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(fc), noJitter, hook)
	c.Task("r", "").Running()
	flushed := flushAsync(c)
	srv.next(t)
	if d := nextWait(t, waits); d != 3*time.Second {
		t.Fatalf("waits %v after Retry-After: 3", d)
	}
	fc.Advance(3*time.Second - time.Millisecond)
	if fc.Waiters() != 1 {
		t.Fatal("resent before Retry-After passed")
	}
	fc.Advance(time.Millisecond)
	if r := srv.next(t); r.status != http.StatusOK {
		t.Fatalf("resend answered %d", r.status)
	}
	if err := wait(t, flushed); err != nil {
		t.Fatal(err)
	}
}

func TestConnectionRefusedThenServerBack(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.down()
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(fc), noJitter, hook)
	run := c.Task("r", "")
	run.Running()
	run.Succeed()
	flushed := flushAsync(c)
	// Two refused attempts: backoff doubles, 100ms then 200ms.
	for i := range 2 {
		retry(t, fc, waits, backoffBase<<i)
	}
	d := nextWait(t, waits)
	srv.up()
	fc.Advance(d)
	if err := wait(t, flushed); err != nil {
		t.Fatal(err)
	}
	if got := srv.storedFor("r"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("stored %v", got)
	}
	if st := c.Stats(); st.Retries != 3 || st.Accepted != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRetryLaterResendsOnlyThoseEvents(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	var once sync.Once
	srv.retryOf = func(e apollo.Event) bool {
		later := false
		if e.TaskID == "b" {
			once.Do(func() { later = true })
		}
		return later
	}
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(fc), noJitter, hook, WithBatchSize(3))
	for _, id := range []string{"a", "b", "c"} {
		c.Task(id, "").Running()
	}
	if r := srv.next(t); r.status != http.StatusTooManyRequests || len(r.events) != 3 {
		t.Fatalf("first request %+v", r)
	}
	flushed := flushAsync(c)
	retry(t, fc, waits, time.Second) // the server's Retry-After
	r := srv.next(t)
	if len(r.events) != 1 || r.events[0].TaskID != "b" {
		t.Fatalf("resent %+v, want only b", r.events)
	}
	if err := wait(t, flushed); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Accepted != 3 || st.Sent != 4 || st.Retries != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRejectedEventsAreNotResent(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL())
	// Raw events: a finished run cannot start again.
	c.Send(apollo.Event{TaskID: "bad", Sequence: 1, Status: apollo.StatusSuccess, Ts: 1764400000001})
	c.Send(apollo.Event{TaskID: "bad", Sequence: 2, Status: apollo.StatusRunning, Ts: 1764400000001})
	c.Send(apollo.Event{TaskID: "good", Sequence: 1, Status: apollo.StatusRunning, Ts: 1764400000001})
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Rejected != 1 || st.Accepted != 2 || st.Sent != 3 || st.Retries != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(srv.requests) != 1 {
		t.Fatalf("%d requests, want 1", len(srv.requests))
	}
}

func TestTooLargeSplitsTheBatch(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	// Room for three events a request: 8 -> 4 -> 2 per request. Set
	// before the events are queued: a full batch may go out at once,
	// before Flush.
	srv.maxBody.Store(3 * 420)
	c := newTestClient(t, srv.URL(), WithBatchSize(8))
	extra := Extra(map[string]any{"pad": strings.Repeat("x", 300)})
	for i := range 8 {
		if err := c.Task(fmt.Sprint("t", i), "").Running(extra); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var order []string
	for len(srv.requests) > 0 {
		r := <-srv.requests
		sizes = append(sizes, len(r.events))
		for _, e := range r.events {
			order = append(order, e.TaskID)
		}
	}
	if st := c.Stats(); st.Accepted != 8 || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
	if !slices.Equal(sizes, []int{2, 2, 2, 2}) {
		t.Errorf("request sizes %v, want 4 of 2 (after two 413s)", sizes)
	}
	if !slices.IsSorted(order) {
		t.Errorf("events went out of order: %v", order)
	}
}

func TestTooLargeSingleEventIsRejected(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.maxBody.Store(50)
	c := newTestClient(t, srv.URL())
	c.Task("big", "").Running()
	c.Task("big2", "").Running()
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Rejected != 2 || st.Accepted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSlowDownStretchesTheInterval(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.slowDown = true
	fc := apollo.NewFakeClock(t0)
	c := newTestClient(t, srv.URL(), WithClock(fc))
	step := func(interval time.Duration) {
		t.Helper()
		c.Task(fmt.Sprint(interval), "").Running()
		armed(t, fc, 1)
		fc.Advance(interval - time.Millisecond)
		if fc.Waiters() != 1 {
			t.Fatalf("sent before %v", interval)
		}
		fc.Advance(time.Millisecond)
		srv.next(t)
	}
	step(200 * time.Millisecond)
	step(400 * time.Millisecond) // doubled after a slowDown answer
	srv.mu.Lock()
	srv.slowDown = false
	srv.mu.Unlock()
	step(800 * time.Millisecond)
	step(400 * time.Millisecond) // and back, halving
	step(200 * time.Millisecond)
	step(200 * time.Millisecond)
}

func TestMaxRetryElapsedDropsWithoutSpool(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.down()
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(fc), noJitter, hook, WithMaxRetryElapsed(time.Second))
	c.Task("x", "").Running()
	flushed := flushAsync(c)
	// Waits of 100, 200, 400ms fit in a second; the next (800ms) would not.
	for i := range 3 {
		retry(t, fc, waits, backoffBase<<i)
	}
	if err := wait(t, flushed); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Dropped != 1 || st.Retries != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestOrderPerTaskUnderRetries reports many runs from many goroutines while
// the server fails requests and answers retry_later at random, then checks
// that every run's events reached the server in sequence order on their
// first try, and were stored exactly once, in order.
func TestOrderPerTaskUnderRetries(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.retryAfter = 0
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	chance := func(p float64) bool {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64() < p
	}
	srv.retryOf = func(apollo.Event) bool { return chance(0.1) }
	zeroWait := Option(func(c *config) { c.jitter = func(time.Duration) time.Duration { return 0 } })
	c := newTestClient(t, srv.URL(), WithBatchSize(16), zeroWait)

	const workers, runs = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range runs {
				if chance(0.05) {
					srv.failNext(1, http.StatusServiceUnavailable, 0)
				}
				run := c.Task(fmt.Sprintf("w%d-r%d", w, r), "job")
				for _, step := range []func(...EventOption) error{run.Pending, run.Running, run.Block, run.Pending, run.Running, run.Fail} {
					if err := step(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	firstSeen := map[string][]int64{}
	seen := map[string]bool{}
	for len(srv.requests) > 0 {
		for _, e := range (<-srv.requests).events {
			key := fmt.Sprint(e.TaskID, "#", e.Sequence)
			if !seen[key] {
				seen[key] = true
				firstSeen[e.TaskID] = append(firstSeen[e.TaskID], e.Sequence)
			}
		}
	}
	if len(firstSeen) != workers*runs {
		t.Fatalf("%d runs reached the server, want %d", len(firstSeen), workers*runs)
	}
	for id, seqs := range firstSeen {
		if !slices.Equal(seqs, ints(1, 6)) {
			t.Errorf("%s: first arrivals %v, want 1..6", id, seqs)
		}
		if got := srv.storedFor(id); !slices.Equal(got, ints(1, 6)) {
			t.Errorf("%s: stored %v, want 1..6 once each", id, got)
		}
	}
	if st := c.Stats(); st.Accepted != workers*runs*6 || st.Retries == 0 {
		t.Errorf("stats %+v: want every event accepted once, after some retries", st)
	}
}

// TestHungRequestIsRetried: a server that hangs and then drops the request
// without an answer gets the events again.
func TestHungRequestIsRetried(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.setHang(false)
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(fc), noJitter, hook)
	c.Task("h", "").Running()
	flushed := flushAsync(c)
	<-srv.hanging
	srv.release() // the handler returns without writing results
	retry(t, fc, waits, backoffBase)
	if err := wait(t, flushed); err != nil {
		t.Fatal(err)
	}
	if got := srv.storedFor("h"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("stored %v", got)
	}
	if st := c.Stats(); st.Retries != 1 || st.Accepted != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTooLargeIsRemembered: once the server refused a request as too
// large, later batches go out in the size it took, not refused once each
// first.
func TestTooLargeIsRemembered(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.maxBody.Store(3 * 420) // room for 2 of 8: 8 -> 4 -> 2
	c := newTestClient(t, srv.URL(), WithBatchSize(8))
	extra := Extra(map[string]any{"pad": strings.Repeat("x", 300)})
	for round := range 3 {
		for i := range 8 {
			if err := c.Task(fmt.Sprint(round, "-t", i), "").Running(extra); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// 8 and 4 refused once, then 12 requests of 2.
	if st := c.Stats(); st.Accepted != 24 || st.Sent != 8+4+24 {
		t.Fatalf("stats %+v, want 24 accepted and %d sent: the refused size remembered", st, 8+4+24)
	}
}
