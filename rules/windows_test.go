package rules

import (
	"fmt"
	"strings"
	"testing"
)

// A new rules file reads at most MaxWindows different windows, pct_change
// counting the window before its own; a saved file is not held to it.
func TestMaxWindows(t *testing.T) {
	t.Parallel()
	file := func(windows int, extra string) string {
		var b strings.Builder
		for i := range windows {
			fmt.Fprintf(&b, "RULE r%d task_prefix: \"p\" WINDOW: %ds THRESHOLD: failed >= 1\n", i, 10*(i+1))
			fmt.Fprintf(&b, "RULE s%d task_prefix: \"q\" WINDOW: %ds THRESHOLD: count == 0\n", i, 10*(i+1)) // the same window again
		}
		return b.String() + extra
	}
	for _, tc := range []struct {
		name, src string
		line      int // of the problem; 0: accepted
	}{
		{"at the limit", file(MaxWindows, ""), 0},
		{"one over", file(MaxWindows+1, ""), 2*MaxWindows + 1},
		{"pct_change reads two", file(MaxWindows-1, "RULE c task_prefix: \"p\" WINDOW: 1h THRESHOLD: pct_change(count) > 50%\n"), 2*MaxWindows - 1},
		{"event rules read none", file(MaxWindows, "RULE e task_prefix: \"p\" ON: failed\n"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.rules", []byte(tc.src))
			if tc.line == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			list, ok := err.(ErrorList)
			if !ok || len(list) != 1 || list[0].Pos.Line != tc.line || !strings.Contains(list[0].Msg, "different windows") {
				t.Fatalf("got %v, want one problem at line %d", err, tc.line)
			}
			if _, err := ParseSaved("f.rules", []byte(tc.src)); err != nil {
				t.Fatalf("saved: %v", err)
			}
		})
	}
}
