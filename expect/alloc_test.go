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

// A file whose YAML aliases make it many times larger than its text is
// refused at a cost in
// proportion to its size, with a problem that says why. Before, an
// alias stood for its anchor again each time it was named: a list of
// 1 000 names behind an anchor, named by 1 000 expectations, or a mapping
// of 1 000 keys named by 1 000 items, took hundreds of MB from a file of
// tens of KB (the same of 4 MiB: hours of a core, and the server's
// memory). Aliases of aliases of a few lines ("billion laughs") are
// refused without being counted out. Not parallel: the figure is the
// process's.
func TestHostileAliasesAndKeysCostInProportionToTheFile(t *testing.T) {
	repeat := func(head, item string, n int, tail string) string {
		var b strings.Builder
		b.WriteString(head)
		for i := range n {
			fmt.Fprintf(&b, item, i)
		}
		b.WriteString(tail)
		return b.String()
	}
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for k, prev := 'b', 'a'; k <= 'j'; k, prev = k+1, k {
		laughs += fmt.Sprintf("%c: &%c [%s]\n", k, k, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*%c, ", prev), 10), ", "))
	}
	for _, tc := range []struct {
		name, src string
		problem   string // in the problems
	}{
		{"a long list of upstream jobs behind an alias",
			repeat("u: &u [", "u%d, ", 1000, "]\nexpectations:\n") + repeat("", "  - {job: j%d, upstream: *u}\n", 1000, ""),
			"YAML aliases make the file more than"},
		{"a mapping of many keys behind an alias",
			repeat("m: &m {", "k%d: 1, ", 1000, "}\nexpectations:\n") + repeat("", "  - *m # %d\n", 1000, ""),
			"unknown or repeated fields; the file was read up to here"},
		{"aliases of aliases", laughs + "expectations:\n  - {job: a, upstream: *j}\n  - job: b\n    flapping: *j\nexpectations2: *j\n",
			"YAML aliases make the file more than"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Parse("hostile.yaml", []byte(tc.src))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), tc.problem) {
			msg := fmt.Sprint(err)
			t.Errorf("%s: %.300s, want a problem that says %q", tc.name, msg, tc.problem)
		}
		if got := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(tc.src)); got > 100 {
			t.Errorf("%s: checking %d bytes allocated %.0f times that, want at most 100", tc.name, len(tc.src), got)
		}
	}
}
