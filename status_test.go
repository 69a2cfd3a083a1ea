package apollo_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	// The same table as docs/protocol.md; a change to one must change both.
	legal := map[apollo.Status][]apollo.Status{
		apollo.StatusNone: {apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess, apollo.StatusFailed,
			apollo.StatusTimeout, apollo.StatusManualBlocked},
		apollo.StatusPending:       {apollo.StatusRunning, apollo.StatusFailed, apollo.StatusTimeout, apollo.StatusManualBlocked},
		apollo.StatusRunning:       {apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout, apollo.StatusManualBlocked},
		apollo.StatusManualBlocked: {apollo.StatusPending},
	}
	all := append([]apollo.Status{apollo.StatusNone}, apollo.Statuses()...)
	for _, from := range all {
		for _, to := range all {
			want := false
			for _, s := range legal[from] {
				want = want || s == to
			}
			if got := apollo.CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%v, %v) = %v, want %v", from, to, got, want)
			}
		}
	}
	for _, s := range []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout} {
		if !s.Final() {
			t.Errorf("%v should be final", s)
		}
	}
	if apollo.CanTransition(apollo.Status(200), apollo.StatusPending) {
		t.Error("out-of-range status accepted")
	}
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()
	for _, s := range apollo.Statuses() {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back apollo.Status
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Errorf("round trip of %v: got %v, %v", s, back, err)
		}
	}
	var s apollo.Status
	err := json.Unmarshal([]byte(`"done"`), &s)
	if apollo.ErrorCode(err) != apollo.EINVALID {
		t.Errorf("unknown status: got %v, want an invalid error", err)
	}
}

func TestEventValidate(t *testing.T) {
	t.Parallel()
	const now = 1_764_400_000_000 // 2025-11-29 in Unix ms
	good := apollo.Event{TaskID: "t1", Sequence: 1, Status: apollo.StatusPending, Ts: now}
	big := make([]byte, apollo.MaxExtraBytes+1)
	for i := range big {
		big[i] = ' '
	}
	tests := []struct {
		name  string
		edit  func(*apollo.Event)
		field string
		says  []string // in the message or the hint
	}{
		{"ok", func(*apollo.Event) {}, "", nil},
		{"every bound", func(e *apollo.Event) {
			e.Sequence, e.Ts, e.ScheduledAt = apollo.MaxSequence, apollo.MaxTs, apollo.MinTs
			e.TimeoutMs, e.CostMs = apollo.MaxDurationMs, apollo.MaxDurationMs
		}, "", nil},
		{"lowest ts", func(e *apollo.Event) { e.Ts = apollo.MinTs }, "", nil},
		{"missing taskID", func(e *apollo.Event) { e.TaskID = "" }, "taskID", []string{"missing"}},
		{"zero sequence", func(e *apollo.Event) { e.Sequence = 0 }, "sequence", []string{"below 1"}},
		{"sequence past 2^53", func(e *apollo.Event) { e.Sequence = apollo.MaxSequence + 1 }, "sequence", []string{"2^53-1"}},
		{"no status", func(e *apollo.Event) { e.Status = apollo.StatusNone }, "status", nil},
		{"no ts", func(e *apollo.Event) { e.Ts = 0 }, "ts", []string{"missing"}},
		{"negative ts", func(e *apollo.Event) { e.Ts = -now }, "ts", []string{"negative"}},
		{"ts in seconds", func(e *apollo.Event) { e.Ts = now / 1000 }, "ts", []string{"seconds", "send milliseconds: 1764400000000"}},
		{"ts in microseconds", func(e *apollo.Event) { e.Ts = now * 1000 }, "ts", []string{"microseconds", "send milliseconds: 1764400000000"}},
		{"ts in nanoseconds", func(e *apollo.Event) { e.Ts = now * 1_000_000 }, "ts", []string{"nanoseconds", "send milliseconds: 1764400000000"}},
		{"ts tiny", func(e *apollo.Event) { e.Ts = 1 }, "ts", []string{"before 2000-01-01", "Unix milliseconds"}},
		{"ts neither ms nor seconds", func(e *apollo.Event) { e.Ts = apollo.MinTs - 1 }, "ts", []string{"before 2000-01-01", "Unix milliseconds"}},
		{"ts int64 max", func(e *apollo.Event) { e.Ts = math.MaxInt64 }, "ts", []string{"after 2200-01-01", "Unix milliseconds"}},
		{"ts just past the end", func(e *apollo.Event) { e.Ts = apollo.MaxTs + 1 }, "ts", []string{"after 2200-01-01"}},
		{"scheduledAt in seconds", func(e *apollo.Event) { e.ScheduledAt = now / 1000 }, "scheduledAt", []string{"seconds"}},
		{"scheduledAt int64 max", func(e *apollo.Event) { e.ScheduledAt = math.MaxInt64 }, "scheduledAt", []string{"after 2200-01-01"}},
		{"negative scheduledAt", func(e *apollo.Event) { e.ScheduledAt = -1 }, "scheduledAt", []string{"negative"}},
		{"timeout int64 max", func(e *apollo.Event) { e.TimeoutMs = math.MaxInt64 }, "timeoutMs", []string{"366 days", "milliseconds"}},
		{"negative timeout", func(e *apollo.Event) { e.TimeoutMs = -1 }, "timeoutMs", []string{"negative"}},
		{"negative cost", func(e *apollo.Event) { e.CostMs = -1 }, "costMs", []string{"negative"}},
		{"cost 5e18", func(e *apollo.Event) { e.CostMs = 5e18 }, "costMs", []string{"366 days"}},
		{"cost a day past a year", func(e *apollo.Event) { e.CostMs = apollo.MaxDurationMs + 1 }, "costMs", nil},
		{"extra too big", func(e *apollo.Event) { e.Extra = big }, "extra", nil},
		{"bad utf8 name", func(e *apollo.Event) { e.Name = "\xff" }, "name", nil},
		{"taskID .", func(e *apollo.Event) { e.TaskID = "." }, "taskID", []string{"URL"}},
		{"taskID ..", func(e *apollo.Event) { e.TaskID = ".." }, "taskID", []string{"URL"}},
		{"name ..", func(e *apollo.Event) { e.Name = ".." }, "name", []string{"URL"}},
		{"dots inside", func(e *apollo.Event) { e.TaskID, e.Name = "../x", "a/./b" }, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := good
			tt.edit(&e)
			err := e.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var ae *apollo.Error
			if !errors.As(err, &ae) || ae.Field != tt.field || ae.Code != apollo.EINVALID {
				t.Fatalf("got %#v, want an invalid error on %s", err, tt.field)
			}
			for _, w := range tt.says {
				if !strings.Contains(ae.Message+" "+ae.Hint, w) {
					t.Errorf("%q (hint %q) does not say %q", ae.Message, ae.Hint, w)
				}
			}
		})
	}
}

func TestCanReach(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to apollo.Status
		want     bool
	}{
		{apollo.StatusNone, apollo.StatusSuccess, true},
		{apollo.StatusPending, apollo.StatusSuccess, true},
		{apollo.StatusRunning, apollo.StatusPending, true}, // via manual_blocked
		{apollo.StatusSuccess, apollo.StatusRunning, false},
		{apollo.StatusFailed, apollo.StatusFailed, false},
		{apollo.StatusTimeout, apollo.StatusPending, false},
		{apollo.StatusManualBlocked, apollo.StatusSuccess, true},
	}
	for _, tt := range tests {
		if got := apollo.CanReach(tt.from, tt.to); got != tt.want {
			t.Errorf("CanReach(%v, %v) = %v", tt.from, tt.to, got)
		}
	}
	// Every legal step is reachable.
	for _, from := range append([]apollo.Status{apollo.StatusNone}, apollo.Statuses()...) {
		for _, to := range apollo.Statuses() {
			if apollo.CanTransition(from, to) && !apollo.CanReach(from, to) {
				t.Errorf("%v -> %v legal but not reachable", from, to)
			}
		}
	}
}

// Reading a known status allocates nothing: a scale-out node reads three
// per change it decodes. An unknown name is still refused.
func TestStatusUnmarshalTextDoesNotAllocate(t *testing.T) {
	names := make([][]byte, 0, len(apollo.Statuses()))
	for _, s := range apollo.Statuses() {
		names = append(names, []byte(s.String()))
	}
	var got apollo.Status
	if n := testing.AllocsPerRun(1000, func() {
		for _, b := range names {
			got.UnmarshalText(b)
		}
	}); n != 0 {
		t.Errorf("UnmarshalText allocates %v times per %d statuses", n, len(names))
	}
	if err := got.UnmarshalText([]byte("Running")); err == nil {
		t.Error(`"Running" was read as a status`)
	}
}
