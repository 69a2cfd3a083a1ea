package apollo_test

import (
	"encoding/json"
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
	good := apollo.Event{TaskID: "t1", Sequence: 1, Status: apollo.StatusPending, Ts: 1}
	big := make([]byte, apollo.MaxExtraBytes+1)
	for i := range big {
		big[i] = ' '
	}
	tests := []struct {
		name  string
		edit  func(*apollo.Event)
		field string
	}{
		{"ok", func(*apollo.Event) {}, ""},
		{"missing taskID", func(e *apollo.Event) { e.TaskID = "" }, "taskID"},
		{"zero sequence", func(e *apollo.Event) { e.Sequence = 0 }, "sequence"},
		{"no status", func(e *apollo.Event) { e.Status = apollo.StatusNone }, "status"},
		{"no ts", func(e *apollo.Event) { e.Ts = 0 }, "ts"},
		{"negative cost", func(e *apollo.Event) { e.CostMs = -1 }, "costMs"},
		{"extra too big", func(e *apollo.Event) { e.Extra = big }, "extra"},
		{"bad utf8 name", func(e *apollo.Event) { e.Name = "\xff" }, "name"},
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
			ae, ok := err.(*apollo.Error)
			if !ok || ae.Field != tt.field || ae.Code != apollo.EINVALID {
				t.Fatalf("got %#v, want an invalid error on %s", err, tt.field)
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
