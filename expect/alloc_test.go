package expect

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Checking a valid file of 4 MiB (as large as a PUT may be) allocates a
// small multiple of its size. Before, it allocated 80 to 130 times it
// (330 to 530 MB): a map of every field's place, and for every field of
// every expectation a map of the eleven fields' pointers, a map of those
// given and one of those seen. Not parallel: the figure is the process's.
func TestCheckingAFileAllocatesInProportionToIt(t *testing.T) {
	if testing.Short() {
		t.Skip("checks three files of 4 MiB")
	}
	for _, tc := range []struct {
		name  string
		item  func(i int) string
		bound float64 // bytes allocated per byte of the file
	}{
		{"an expectation of three fields", func(i int) string {
			return fmt.Sprintf("  - job: job_%07d\n    schedule: \"*/5 * * * *\"\n    max_runtime: 1h\n", i)
		}, 50},
		{"a chain of upstream jobs", func(i int) string {
			return fmt.Sprintf("  - job: job_%07d\n    upstream: [job_%07d]\n", i, i+1)
		}, 50},
		// The YAML library's nodes alone are some 25 bytes for each byte
		// of a file of such tiny items.
		{"tiny items", func(i int) string { return fmt.Sprintf("  - {job: j%d}\n", i) }, 70},
	} {
		var b strings.Builder
		b.WriteString("expectations:\n")
		n := 0
		for ; b.Len() < 4<<20; n++ {
			b.WriteString(tc.item(n))
		}
		src := []byte(b.String())
		b.Reset()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		set, err := Parse("big.yaml", src)
		runtime.ReadMemStats(&after)
		if err != nil || set.Len() != n {
			t.Fatalf("%s: %v, want %d expectations", tc.name, err, n)
		}
		if got := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(src)); got > tc.bound {
			t.Errorf("%s: checking %d bytes (%d expectations) allocated %.0f times that, want at most %.0f",
				tc.name, len(src), n, got, tc.bound)
		}
	}
}
