package testwait

import (
	"context"
	"testing"
	"time"
)

// generous is the wait for one thing on a quiet machine, with ample room:
// what takes milliseconds there can take seconds on two cores shared with
// a dozen other processes. raceFactor (race.go) scales it under -race.
const generous = time.Minute

// Timeout is how long t may wait for one thing: generous (scaled for
// -race), but never past nine tenths of the time left before the test
// binary's deadline (t.Deadline), so that the test, not the -timeout
// panic, reports what it was waiting for.
func Timeout(t testing.TB) time.Duration {
	d := Generous()
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := dt.Deadline(); ok {
			d = min(d, time.Until(end)*9/10)
		}
	}
	return d
}

// Generous is the wait for code that has no testing.TB to ask for its
// deadline, such as a testscript command: Timeout without the cap.
func Generous() time.Duration { return generous * raceFactor }

// Context returns a context that ends after Timeout(t), and at the latest
// when t ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout(t))
	t.Cleanup(cancel)
	return ctx
}
