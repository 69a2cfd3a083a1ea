package apiclient_test

import (
	"io"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
)

func TestWatchReady(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"starting\n" + apiclient.ReadyPrefix + "http://127.0.0.1:8080  (data in d)\nlater\n", "127.0.0.1:8080"},
		{apiclient.ReadyPrefix + "https://[::1]:443\n", "[::1]:443"},
		{apiclient.ReadyPrefix + "\n", ""},
		// Only the first ready line counts.
		{apiclient.ReadyPrefix + "http://a:1\n" + apiclient.ReadyPrefix + "http://b:2\n", "a:1"},
	} {
		up := apiclient.WatchReady(strings.NewReader(tc.out), apiclient.ReadyPrefix)
		if got := <-up; got != tc.want {
			t.Errorf("%q: address %q, want %q", tc.out, got, tc.want)
		}
	}
}

// TestWatchReadyDrainsTheRest: a child that keeps writing after its ready
// line (or writes a line longer than the scanner takes) never blocks on
// the pipe.
func TestWatchReadyDrainsTheRest(t *testing.T) {
	r, w := io.Pipe()
	up := apiclient.WatchReady(r, apiclient.ReadyPrefix)
	io.WriteString(w, apiclient.ReadyPrefix+"http://h:1\n")
	if got := <-up; got != "h:1" {
		t.Fatalf("address %q", got)
	}
	long := strings.Repeat("x", 1<<20) + "\n" // over bufio's 64 KiB line limit
	for range 3 {
		if _, err := io.WriteString(w, long); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
}

func FuzzWatchReady(f *testing.F) {
	f.Add(apiclient.ReadyPrefix + "http://127.0.0.1:8080  (data in d)\n")
	f.Add("noise\n" + apiclient.ReadyPrefix + "\t\x00https://x\n")
	f.Fuzz(func(t *testing.T, out string) {
		up := apiclient.WatchReady(strings.NewReader(out), apiclient.ReadyPrefix)
		first := ""
		for _, line := range strings.Split(out, "\n") {
			if len(line) >= 60000 {
				return // past the scanner's line limit: reading stops there
			}
			if strings.HasPrefix(line, apiclient.ReadyPrefix) {
				first = line
				break
			}
		}
		if first == "" {
			return
		}
		addr := <-up
		if strings.ContainsAny(addr, " \t\r\n") || !strings.Contains(first, addr) {
			t.Fatalf("address %q from the line %q", addr, first)
		}
	})
}
