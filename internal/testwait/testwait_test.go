package testwait

import (
	"testing"
	"time"
)

// TestTimeoutWithinDeadline: the wait is generous, yet ends before the
// binary's deadline with time left to report.
func TestTimeoutWithinDeadline(t *testing.T) {
	d := Timeout(t)
	if d <= 0 || d > generous*raceFactor {
		t.Fatalf("Timeout %v, want in (0, %v]", d, generous*raceFactor)
	}
	if end, ok := t.Deadline(); ok && time.Now().Add(d).After(end) {
		t.Errorf("Timeout %v ends after the test deadline %v", d, end)
	}
	ctx := Context(t)
	if end, ok := ctx.Deadline(); !ok || time.Until(end) > d {
		t.Errorf("Context deadline %v, want within %v", end, d)
	}
}
