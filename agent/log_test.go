package agent

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// recordHandler keeps the log records a client writes.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *recordHandler) attrs(i int) map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]slog.Value{}
	h.records[i].Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
	return m
}

func TestRejectedEventsAreLoggedRateLimited(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	fc := apollo.NewFakeClock(t0)
	h := &recordHandler{}
	c := newTestClient(t, srv.URL(), WithClock(fc), WithLogger(slog.New(h)))
	reject := func(id string) {
		// A finished run cannot start again: the server rejects the second.
		c.Send(apollo.Event{TaskID: id, Sequence: 1, Status: apollo.StatusSuccess, Ts: 1764400000001})
		c.Send(apollo.Event{TaskID: id, Sequence: 2, Status: apollo.StatusRunning, Ts: 1764400000001})
	}
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		reject(id)
	}
	c.Flush(context.Background())
	fc.Advance(logEvery)
	reject("r5")
	c.Flush(context.Background())

	if n := len(h.records); n != 2 {
		t.Fatalf("%d log lines for 5 rejected events, want 2", n)
	}
	first, second := h.attrs(0), h.attrs(1)
	if first["taskID"].String() != "r1" || first["code"].String() != apollo.ECONFLICT || first["field"].String() != "status" {
		t.Errorf("first line %v", first)
	}
	if second["taskID"].String() != "r5" || second["suppressed"].Int64() != 3 {
		t.Errorf("second line %v, want r5 with 3 suppressed", second)
	}
	if st := c.Stats(); st.Rejected != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-2":                            0,
		"1.5":                           0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0,
		"100000":                        maxRetryAfter,
	} {
		if got := retryAfter(h); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}
