package cluster

import "testing"

// What "settled" means for a node below its share (Ready): nothing is
// left for it to claim, now or after a handover.
func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		partitions, share, serving, leases int
		held                               map[string]int
		want                               bool
	}{
		{"more nodes than partitions", 2, 1, 0, 2, map[string]int{"a": 1, "b": 1}, true},
		{"a partition free", 4, 2, 1, 3, map[string]int{"a": 2, "me": 1}, false},
		{"a node over its share hands over", 4, 2, 0, 4, map[string]int{"a": 4}, false},
		{"a lease of this ID from the process before", 2, 1, 0, 2, map[string]int{"a": 1, "me": 1}, false},
		{"a lease of this ID being rebuilt", 3, 1, 0, 3, map[string]int{"a": 1, "b": 1, "me": 1}, false},
		{"serving what it holds", 3, 1, 1, 3, map[string]int{"a": 1, "b": 1, "me": 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := settled("me", tc.partitions, tc.share, tc.serving, tc.leases, tc.held); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}
