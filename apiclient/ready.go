package apiclient

import (
	"bufio"
	"io"
	"strings"
)

// ReadyPrefix starts the line a server or bus node prints on its standard
// output once it serves: "Apollo-11 is up: http://ADDR  (...)". A
// supervisor (a test, a benchmark, a deploy script) waits for it instead
// of polling the port.
const ReadyPrefix = "Apollo-11 is up: "

// WatchReady reads r line by line until it ends. The first line that
// starts with prefix sends its address on the returned channel: the first
// word after the prefix, without its http:// or https://, or "" for a
// line with nothing after the prefix. Everything else is read and dropped,
// so a child process never blocks on a full pipe. The channel has room for
// the one address and is never closed; watch the process's exit beside it.
func WatchReady(r io.Reader, prefix string) <-chan string {
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), prefix)
			if !ok || sent {
				continue
			}
			sent = true
			addr := ""
			if f := strings.Fields(rest); len(f) > 0 {
				addr = strings.TrimPrefix(strings.TrimPrefix(f[0], "http://"), "https://")
			}
			up <- addr
		}
		io.Copy(io.Discard, r) // a line too long for the scanner ends the scan, not the reading
	}()
	return up
}
