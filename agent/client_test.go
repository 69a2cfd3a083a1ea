package agent

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url string
		opts      []Option
		want      string
	}{
		{"no scheme", "127.0.0.1:1969", nil, "baseURL"},
		{"ftp", "ftp://x", nil, "http or https"},
		{"no host", "http://", nil, "no host"},
		{"query", "http://x/?a=1", nil, "no query"},
		{"batch zero is default, negative is not", "http://x", []Option{WithBatchSize(-1)}, "WithBatchSize(-1)"},
		{"batch too big", "http://x", []Option{WithBatchSize(maxBatchSize + 1)}, "WithBatchSize"},
		{"buffer below batch", "http://x", []Option{WithBatchSize(50), WithBufferSize(10)}, "WithBufferSize(10)"},
		{"negative interval", "http://x", []Option{WithFlushInterval(-time.Second)}, "WithFlushInterval"},
		{"negative retry", "http://x", []Option{WithMaxRetryElapsed(-1)}, "WithMaxRetryElapsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.url, tt.opts...)
			if err == nil {
				c.Close(context.Background())
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	for base, want := range map[string]string{
		"http://h:1969":       "http://h:1969/api/v1/events",
		"https://h/apollo/":   "https://h/apollo/api/v1/events",
		"http://user@h:1/x/y": "http://user@h:1/x/y/api/v1/events",
		"http://[::1]:1969":   "http://[::1]:1969/api/v1/events",
		"HTTP://h:1969":       "http://h:1969/api/v1/events",
	} {
		got, err := eventsURL(base)
		if err != nil || got != want {
			t.Errorf("eventsURL(%q) = %q, %v; want %q", base, got, err, want)
		}
	}
}

func TestTaskNumbersEventsAndBatchesBySize(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	fc := apollo.NewFakeClock(t0)
	c := newTestClient(t, srv.URL(), WithClock(fc), WithBatchSize(5))
	a, b := c.Task("a", "job"), c.Task("b", "")
	for _, step := range []func(*Task, ...EventOption) error{(*Task).Pending, (*Task).Running, (*Task).Block, (*Task).Pending, (*Task).Running, (*Task).Succeed} {
		if err := step(a); err != nil {
			t.Fatal(err)
		}
		if err := step(b); err != nil {
			t.Fatal(err)
		}
	}
	// 12 events, batches of 5: two full batches go at once, the last two
	// wait for the flush interval.
	var got []apollo.Event
	for _, want := range []int{5, 5} {
		r := srv.next(t)
		if len(r.events) != want {
			t.Fatalf("request of %d events, want %d", len(r.events), want)
		}
		got = append(got, r.events...)
	}
	armed(t, fc, 1)
	fc.Advance(DefaultFlushInterval)
	r := srv.next(t)
	if len(r.events) != 2 {
		t.Fatalf("interval batch of %d events, want 2", len(r.events))
	}
	got = append(got, r.events...)
	for _, id := range []string{"a", "b"} {
		if s := seqsOf(got, id); !slices.Equal(s, ints(1, 6)) {
			t.Errorf("task %s sent sequences %v, want 1..6 in order", id, s)
		}
	}
	if got[0].Name != "job" || got[1].Name != "" || got[0].Ts != t0.UnixMilli() {
		t.Errorf("first events: %+v %+v", got[0], got[1])
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Accepted != 12 || st.Sent != 12 || st.Buffered != 0 || st.Retries != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPartialBatchWaitsForInterval(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	fc := apollo.NewFakeClock(t0)
	c := newTestClient(t, srv.URL(), WithClock(fc), WithFlushInterval(time.Second))
	run := c.Task("r", "job")
	run.Running()
	run.Succeed()
	armed(t, fc, 1)
	fc.Advance(time.Second - time.Millisecond)
	if fc.Waiters() != 1 {
		t.Fatal("the interval timer fired early")
	}
	fc.Advance(time.Millisecond)
	if r := srv.next(t); len(r.events) != 2 {
		t.Fatalf("sent %d events, want 2 in one request", len(r.events))
	}
}

func TestFlushSendsAtOnce(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL(), WithClock(apollo.NewFakeClock(t0)), WithFlushInterval(time.Hour))
	c.Task("f", "").Running()
	// The clock never moves: only Flush can make the client send.
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := srv.storedFor("f"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("stored %v", got)
	}
	// Nothing new: Flush returns without a request.
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(srv.requests) != 1 {
		t.Fatalf("%d requests, want 1", len(srv.requests))
	}
}

func TestTaskRefusesBadCallsWithoutUsingASequence(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL())
	run := c.Task("t", "job")
	big := map[string]any{"log": strings.Repeat("x", apollo.MaxExtraBytes)}
	tests := []struct {
		name  string
		call  func() error
		code  string
		field string
	}{
		{"extra over 4 KiB", func() error { return run.Running(Extra(big)) }, apollo.EINVALID, "extra"},
		{"extra not encodable", func() error { return run.Running(Extra(map[string]any{"f": func() {}})) }, apollo.EINVALID, "extra"},
		{"negative cost", func() error { return run.Running(Cost(-time.Second)) }, apollo.EINVALID, "costMs"},
	}
	for _, tt := range tests {
		err := tt.call()
		var ae *apollo.Error
		if !errors.As(err, &ae) || ae.Code != tt.code || ae.Field != tt.field {
			t.Errorf("%s: got %v, want %s on %s", tt.name, err, tt.code, tt.field)
		}
	}
	at := time.UnixMilli(1_700_000_000_000)
	if err := run.Running(At(at), ScheduledAt(at.Add(-time.Minute)), TimeoutAfter(time.Hour), Extra(map[string]any{"host": "h1"})); err != nil {
		t.Fatal(err)
	}
	if err := run.Succeed(Cost(90 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := run.Running(); apollo.ErrorCode(err) != apollo.ECONFLICT {
		t.Errorf("running after the end: %v, want a conflict", err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.stored) != 2 {
		t.Fatalf("stored %d events, want 2", len(srv.stored))
	}
	got := srv.stored[0]
	if got.Sequence != 1 || got.Ts != at.UnixMilli() || got.ScheduledAt != at.Add(-time.Minute).UnixMilli() ||
		got.TimeoutMs != 3_600_000 || string(got.Extra) != `{"host":"h1"}` {
		t.Errorf("first event %+v", got)
	}
	if s := srv.stored[1]; s.Sequence != 2 || s.CostMs != 90_000 || s.Status != apollo.StatusSuccess {
		t.Errorf("second event %+v", s)
	}
}

func TestSendValidatesRawEvents(t *testing.T) {
	t.Parallel()
	c := newTestClient(t, "http://127.0.0.1:1")
	err := c.Send(apollo.Event{TaskID: "x", Status: apollo.StatusRunning, Ts: 1764400000001})
	if apollo.ErrorCode(err) != apollo.EINVALID {
		t.Fatalf("sequence 0 accepted: %v", err)
	}
}

func TestBufferFullWithoutSpool(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.down()
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(fc), WithBatchSize(2), WithBufferSize(4), hook)
	send := func(i int) error {
		return c.Send(apollo.Event{TaskID: "full", Sequence: int64(i), Status: apollo.StatusRunning, Ts: 1764400000001})
	}
	send(1)
	send(2)
	nextWait(t, waits) // the first two are in flight, waiting to retry
	for i := 3; i <= 6; i++ {
		if err := send(i); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	err := send(7)
	if !errors.Is(err, ErrBufferFull) || apollo.ErrorCode(err) != apollo.ETOOMANY {
		t.Fatalf("got %v, want ErrBufferFull", err)
	}
	if st := c.Stats(); st.Dropped != 1 || st.Buffered != 6 {
		t.Fatalf("stats %+v, want 1 dropped and 6 buffered", st)
	}
	closeNow(t, c, 6)
}

func TestCloseIsIdempotentAndRefusesLaterEvents(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL())
	c.Task("c", "").Running()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := srv.storedFor("c"); len(got) != 1 {
		t.Fatalf("Close did not deliver: stored %v", got)
	}
	if err := c.Task("d", "").Running(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after Close with nothing pending: %v", err)
	}
}

func TestCloseWithoutSpoolCountsWhatIsLost(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.down()
	hook, waits := retryWaits()
	c := newTestClient(t, srv.URL(), WithClock(apollo.NewFakeClock(t0)), hook)
	for i := range 3 {
		c.Task(string(rune('a'+i)), "").Running()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() error { return c.Close(ctx) })
	nextWait(t, waits) // in backoff after a refused connection
	cancel()
	err := wait(t, done)
	if err == nil || !strings.Contains(err.Error(), "3 events not delivered") || !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v", err)
	}
	if st := c.Stats(); st.Dropped != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// A run reported only by its end is one event, numbered 1, that the server
// takes: a finished run with an unknown start (docs/protocol.md).
func TestRunReportedOnlyByItsEnd(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL())
	if err := c.Task("cron-1", "nightly").Fail(Cost(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.stored) != 1 || srv.stored[0].Sequence != 1 || srv.stored[0].Status != apollo.StatusFailed || srv.stored[0].CostMs != 3000 {
		t.Fatalf("stored %+v", srv.stored)
	}
	if st := c.Stats(); st.Accepted != 1 || st.Rejected != 0 {
		t.Errorf("stats %+v", st)
	}
}

// An event answered waiting is stored: the client counts it and does not
// send it again (a client that did not know the word resent it until the
// wait was over).
func TestWaitingIsNotResent(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL())
	ts := t0.UnixMilli()
	for _, e := range []apollo.Event{
		{TaskID: "w", Sequence: 1, Status: apollo.StatusRunning, Ts: ts},
		{TaskID: "w", Sequence: 3, Status: apollo.StatusPending, Ts: ts}, // 2 (manual_blocked) is missing
	} {
		if err := c.Send(e); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if st := c.Stats(); st.Accepted != 1 || st.Waiting != 1 || st.Sent != 2 || st.Retries != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestTimeoutAfterRoundsUp: a deadline under a millisecond, or with a
// part of one, must not become no deadline (0) or a shorter one: the
// server's ping URLs round ?timeout= up to whole milliseconds too.
func TestTimeoutAfterRoundsUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{500 * time.Microsecond, 1},
		{1500 * time.Microsecond, 2},
		{time.Second, 1000},
		{time.Duration(math.MaxInt64), math.MaxInt64/int64(time.Millisecond) + 1},
	} {
		ev, err := applyOptions([]EventOption{TimeoutAfter(tc.d)})
		if err != nil || ev.TimeoutMs != tc.want {
			t.Errorf("TimeoutAfter(%v): timeoutMs %d (%v), want %d", tc.d, ev.TimeoutMs, err, tc.want)
		}
	}
}

// TestNewRefusesATokenNoHeaderCanCarry: a token read from a file with
// Windows line ends keeps its "\r" ($(cat file) drops only "\n"). No HTTP
// header can carry it, so every request failed before it left, and the
// client retried it as if the server were down (apollo report: "is the
// server running?"). New says what is wrong with the token, at once.
func TestNewRefusesATokenNoHeaderCanCarry(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"apl_abc\r", "apl_abc\n", "apl\x00abc", "apl_abc\x7f"} {
		_, err := New("http://127.0.0.1:1", WithToken(tok))
		if err == nil || !strings.Contains(err.Error(), "WithToken") || !strings.Contains(err.Error(), "control character") {
			t.Errorf("New with token %q: %v", tok, err)
		}
	}
	c, err := New("http://127.0.0.1:1", WithToken("apl_Abc-123_x.y"))
	if err != nil {
		t.Fatalf("a plain token: %v", err)
	}
	c.Close(context.Background())
}

// TestZeroTimesAreLeftOut: ScheduledAt and At given a zero time.Time (a
// struct field never set: a run with no schedule) sent year 1 in
// milliseconds, and every event of the run was refused ("scheduledAt:
// -62135596800000 is negative ... e.g. date +%s%3N"). A zero time is no
// time: no scheduledAt, and ts from the client's clock.
func TestZeroTimesAreLeftOut(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	fc := apollo.NewFakeClock(t0)
	c := newTestClient(t, srv.URL(), WithClock(fc))
	if err := c.Task("zero", "job").Running(ScheduledAt(time.Time{}), At(time.Time{})); err != nil {
		t.Fatalf("Running with zero times: %v", err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := srv.next(t).events[0]
	if got.ScheduledAt != 0 || got.Ts != t0.UnixMilli() {
		t.Fatalf("scheduledAt %d ts %d, want none and %d", got.ScheduledAt, got.Ts, t0.UnixMilli())
	}
}
