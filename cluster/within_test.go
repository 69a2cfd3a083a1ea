package cluster

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
)

// Apollo-Within comes from another process: whatever it holds, a question
// is skipped only when it waited longer than a wait the header states.
// Before, a wait of more than 292 years (int64 milliseconds past the range
// of a Duration) overflowed to a negative one, and such a question, and
// one with a negative wait, was skipped at once.
func TestWithinAtItsExtremes(t *testing.T) {
	clock := apollo.NewFakeClock(time.Unix(1_764_547_200, 0))
	n := &Node{opts: Options{Clock: clock}}
	heard := clock.Now()
	clock.Advance(2 * time.Second)
	for _, c := range []struct {
		within string
		late   bool
	}{
		{"1000", true},
		{"2000", false}, // waited exactly as long: still waited for
		{"1999", true},
		{"9223372036854775807", false},
		{"9223372036854", false}, // the largest whole Duration in ms, and past it
		{"9223372036855", false},
		{"-1", false}, // not a wait: answered, as a question without one
		{"-9223372036854775808", false},
		{"", false},
		{"12s", false},
		{"\x00", false},
	} {
		m := &nats.Msg{Header: nats.Header{}}
		if c.within != "" {
			m.Header.Set(withinHeader, c.within)
		}
		if late, _ := n.late(question{m: m, heard: heard}); late != c.late {
			t.Errorf("Apollo-Within %q after 2s: late %v, want %v", c.within, late, c.late)
		}
	}
}
