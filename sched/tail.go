package sched

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits of the output kept per stream of a run: the last tailLines lines
// of the last tailBytes bytes, so that stdout and stderr tails together fit
// the 4 KiB limit on an event's extra.
const (
	tailBytes = 2 << 10
	tailLines = 20
)

// tail keeps the last tailBytes bytes written to it, in a fixed ring, so a
// chatty job costs the scheduler no more memory than a quiet one.
type tail struct {
	mu   sync.Mutex
	buf  [tailBytes]byte
	n    int64 // bytes written in total
	head int   // next write position in buf
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > tailBytes {
		p = p[len(p)-tailBytes:]
	}
	k := copy(t.buf[t.head:], p)
	copy(t.buf[:], p[k:])
	t.head = (t.head + len(p)) % tailBytes
	t.n += int64(n)
	return n, nil
}

// String returns the kept output: at most tailLines lines, starting on a
// whole UTF-8 character, with invalid bytes replaced.
func (t *tail) String() string {
	t.mu.Lock()
	var b []byte
	if t.n < tailBytes {
		b = append(b, t.buf[:t.head]...)
	} else {
		b = append(append(b, t.buf[t.head:]...), t.buf[:t.head]...)
	}
	t.mu.Unlock()
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return lastLines(s, tailLines)
}

// lastLines returns the last n lines of s; a final newline does not start
// a line of its own.
func lastLines(s string, n int) string {
	end := len(strings.TrimSuffix(s, "\n"))
	i := end
	for k := 0; k < n; k++ {
		j := strings.LastIndexByte(s[:i], '\n')
		if j < 0 {
			return s
		}
		i = j
	}
	return s[i+1:]
}
