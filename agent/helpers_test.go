package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

var t0 = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// noJitter makes backoff waits their upper bound, so a test knows how far
// to move the fake clock.
var noJitter = Option(func(c *config) { c.jitter = func(d time.Duration) time.Duration { return d } })

func quietLogger() Option { return WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))) }

// newTestClient starts a client that the test closes at cleanup.
func newTestClient(t testing.TB, url string, opts ...Option) *Client {
	t.Helper()
	c, err := New(url, append([]Option{quietLogger()}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// armed waits until the client has armed n timers on the fake clock: it is
// then blocked on them and moving the clock is what makes it go on.
func armed(t testing.TB, fc *apollo.FakeClock, n int) {
	t.Helper()
	if !fc.BlockUntil(n, testwait.Timeout(t)) {
		t.Fatalf("the client did not arm %d timer(s) (armed: %d)", n, fc.Waiters())
	}
}

// async runs f in a goroutine and returns a channel with its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func wait(t testing.TB, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("call did not return")
		return nil
	}
}

func flushAsync(c *Client) <-chan error {
	return async(func() error { return c.Flush(context.Background()) })
}

func seqsOf(events []apollo.Event, taskID string) []int64 {
	var out []int64
	for _, e := range events {
		if e.TaskID == taskID {
			out = append(out, e.Sequence)
		}
	}
	return out
}

func ints(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// closeNow closes c without waiting for delivery and checks that exactly
// lost events were given up.
func closeNow(t testing.TB, c *Client, lost int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.Close(ctx)
	switch {
	case lost == 0 && err != nil:
		t.Fatalf("Close: %v", err)
	case lost > 0 && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d events not delivered", lost))):
		t.Fatalf("Close: %v, want %d events not delivered", err, lost)
	}
}

// retryWaits returns an option that reports every retry wait on the
// returned channel, once its timer is armed.
func retryWaits() (Option, <-chan time.Duration) {
	ch := make(chan time.Duration, 1000)
	return Option(func(c *config) { c.onRetryWait = func(d time.Duration) { ch <- d } }), ch
}

// nextWait waits for the client to start its next retry wait.
func nextWait(t testing.TB, waits <-chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-waits:
		return d
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the client did not start a retry wait")
		return 0
	}
}

// retry waits for the client's next retry wait, checks its length if want
// is not 0, and moves the fake clock past it.
func retry(t testing.TB, fc *apollo.FakeClock, waits <-chan time.Duration, want time.Duration) {
	t.Helper()
	d := nextWait(t, waits)
	if want != 0 && d != want {
		t.Fatalf("retry wait %v, want %v", d, want)
	}
	fc.Advance(d)
}
