package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// A node's warnings are limited to one a second each, not one a second in
// all: a flood of one kind (late questions, dropped events) does not hide
// a lease that could not be renewed in the same second, and each kind
// still says how many of it were held back.
func TestEachKindOfWarningHasItsOwnLimit(t *testing.T) {
	var out bytes.Buffer
	clock := apollo.NewFakeClock(time.Unix(1_764_547_200, 0))
	n := &Node{opts: Options{Clock: clock}, log: slog.New(slog.NewTextHandler(&out, nil)), warns: loglimit.New(time.Second)}
	for range 5 {
		n.warn("event dropped: not a valid event", "err", "bad")
	}
	n.warn("lease renewal failed; retrying", "partition", 3)
	clock.Advance(time.Second)
	n.warn("event dropped: not a valid event", "err", "bad")
	got := out.String()
	if !strings.Contains(got, "lease renewal failed") {
		t.Errorf("the lease's warning was held back behind another kind's:\n%s", got)
	}
	if c := strings.Count(got, "event dropped"); c != 2 || !strings.Contains(got, "suppressed=4") {
		t.Errorf("the flood's warnings: %d lines (want 2, the second saying suppressed=4):\n%s", c, got)
	}
}
