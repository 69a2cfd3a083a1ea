package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
)

// An alert process that cannot read the saved rules from Redis says so
// once a minute, with how many failed reads it held back, not at every
// alert.interval: an outage of eight minutes with an interval of 1 s
// wrote 511 lines of it, and with the default 10 s it is six a minute.
func TestUnreadableSavedRulesAreLoggedOnceAMinute(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	clock := apollo.NewFakeClock(time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC))
	p := newAlertProcess(config.Default(), nil, slog.New(slog.NewTextHandler(&logs, nil)), clock)
	lines := func() int { return strings.Count(logs.String(), "reading the saved rules from Redis") }
	for range 60 {
		p.catchUpRules(nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"))
		clock.Advance(time.Second)
	}
	if n := lines(); n != 1 {
		t.Fatalf("%d lines in the first minute of failed reads, want 1:\n%s", n, logs.String())
	}
	p.catchUpRules(nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"))
	if n := lines(); n != 2 || !strings.Contains(logs.String(), "suppressed=59") {
		t.Fatalf("after a minute: %d lines, want 2, the second with suppressed=59:\n%s", n, logs.String())
	}
}
