package sourcefile

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
)

// ReadOwn is Read for a file the server writes itself in its data
// directory (alerts.json, each tenant's file in rules/ and
// expectations/, the scheduler's state): limit is more than the server
// ever writes there, so a file past it, or one that is not a regular
// file (a link to /dev/zero), was replaced or damaged, and the errors say
// so instead of asking for another path. Reading it whole would fill
// memory before the start could say which file is wrong.
func ReadOwn(path, what string, limit int64) ([]byte, error) {
	return read(path, what, limit, true)
}

// OpenOwn opens a file the server writes itself for a streaming read
// (its journals: the outbox, the audit log), refusing anything but a
// regular file as ReadOwn does.
func OpenOwn(path, what string) (*os.File, error) {
	f, _, err := open(path, what, true)
	return f, err
}

// Line is one line of ScanLines.
type Line struct {
	Text []byte // without its '\n'; nil when Long
	// Long: the line is over the limit; it was skipped, not held.
	Long bool
	// Ended: a '\n' ends it. Only the last line of a file may lack one
	// (a write cut short).
	Ended bool
	End   int64 // the offset just past the line and its '\n'
	N     int   // its number, from 1
}

// ScanLines calls fn with each line of r in turn, holding at most max
// bytes of one: a longer line is skipped to its end and given as Long,
// so that a file of one endless line costs no more memory than a short
// one. fn's error stops the scan and is returned. Text is valid only
// during the call.
func ScanLines(r io.Reader, max int, fn func(Line) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf  []byte
		long bool // the line so far is over max: buf holds nothing of it
		off  int64
		n    int
	)
	for {
		part, err := br.ReadSlice('\n')
		off += int64(len(part))
		text := bytes.TrimSuffix(part, []byte{'\n'})
		ended := len(text) < len(part)
		if !long && len(buf)+len(text) > max {
			long, buf = true, buf[:0]
		}
		if !long {
			buf = append(buf, text...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if !ended && !long && len(buf) == 0 { // the end of the file, after a '\n'
			return nil
		}
		n++
		l := Line{Long: long, Ended: ended, End: off, N: n}
		if !long {
			l.Text = buf
		}
		if ferr := fn(l); ferr != nil {
			return ferr
		}
		buf, long = buf[:0], false
		if err != nil { // io.EOF
			return nil
		}
	}
}
