//go:build unix

package agent

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apollo-11/apollo"
)

// TestSpoolRefusesAFileSwappedForAFIFOOrASymlink: the reader opened a
// spool file by its name with a plain open, after the directory was
// listed or the file written. Someone else who can write in the spool
// directory, swapping the name for a FIFO in between, left the reader
// blocked in open with the client's lock held: every reporting call of
// the job hung. Swapping it for a symbolic link had the reader follow it
// and send what it pointed at with this client's token: here another
// tenant's spooled events, sent into the wrong tenant. The reader now
// opens without following links or waiting for a writer, and reads only
// the regular file it listed or wrote: anything else is refused with a
// log line, left where it is, and the client goes on. (A regular file
// put under the name, another tenant's spool file renamed there, is
// refused too: it is not the file the client wrote.)
func TestSpoolRefusesAFileSwappedForAFIFOOrASymlink(t *testing.T) {
	t.Parallel()
	for kind, says := range map[string]string{"fifo": "is a named pipe (FIFO), not a regular file",
		"symlink": "is a symbolic link, not a regular file", "file": "is not the file this client listed or wrote"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// Tenant b's spool, elsewhere: what the link points at.
			theirs := filepath.Join(t.TempDir(), spoolName(1, 0, tokenTag("tenant-b-token")))
			var lines strings.Builder
			for i := range 20 {
				fmt.Fprintf(&lines, `{"taskID":"b-secret-%d","sequence":1,"status":"running","ts":1764400000001}`+"\n", i)
			}
			if err := os.WriteFile(theirs, []byte(lines.String()), 0o600); err != nil {
				t.Fatal(err)
			}

			srv := newProtocolServer(t)
			srv.down()
			fc := apollo.NewFakeClock(t0)
			hook, waits := retryWaits()
			h := &recordHandler{}
			c := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tenant-a-token"), WithClock(fc),
				WithBatchSize(1), WithBufferSize(1), noJitter, hook, WithLogger(slog.New(h)))
			run := c.Task("a-run", "job")
			cycle(run, 1)
			nextWait(t, waits) // event 1 is with the sender, retrying
			cycle(run, 2)      // in memory
			cycle(run, 3)      // overflows 2 and 3 to disk
			files := spoolFiles(t, dir)
			if len(files) != 1 {
				t.Fatalf("spool files %v, want the overflow file", files)
			}
			path := filepath.Join(dir, files[0])
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			switch kind {
			case "fifo":
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
				// Before the fix the reader is stuck in open: a writer
				// lets it go, so that a failing test ends.
				t.Cleanup(func() {
					if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
				})
			case "symlink":
				if err := os.Symlink(theirs, path); err != nil {
					t.Fatal(err)
				}
			case "file": // no link to refuse: the name now holds their file
				if err := os.Rename(theirs, path); err != nil {
					t.Fatal(err)
				}
			}

			srv.up()
			fc.Advance(backoffBase)
			if err := wait(t, flushAsync(c)); err != nil {
				t.Fatal(err)
			}
			if got := srv.storedCount() - len(srv.storedFor("a-run")); got != 0 {
				t.Fatalf("%d of tenant b's events were sent with tenant a's token", got)
			}
			if got := srv.storedFor("a-run"); !slices.Equal(got, []int64{1}) {
				t.Fatalf("stored %v, want event 1 (2 and 3 went with the swapped file)", got)
			}
			if !h.logged(says) {
				t.Fatalf("no log line says the spool file was refused: %v", h.messages())
			}
			// The client goes on, and leaves what it refused alone.
			if err := c.Task("a-after", "job").Running(); err != nil {
				t.Fatal(err)
			}
			if err := wait(t, flushAsync(c)); err != nil {
				t.Fatal(err)
			}
			if got := srv.storedFor("a-after"); len(got) != 1 {
				t.Fatalf("a later event: stored %v", got)
			}
			closeNow(t, c, 0)
			if info, err := os.Lstat(path); err != nil || (kind != "file") == info.Mode().IsRegular() {
				t.Fatalf("the refused %s was removed or changed: %v %v", kind, info, err)
			}

			// The next process lists the directory: it skips what is not a
			// regular file, and never sends tenant b's events either. (A
			// regular file under a name of tenant a's is tenant a's to
			// send: whoever may write in the directory may spool.)
			if kind == "file" {
				return
			}
			c2 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tenant-a-token"))
			if err := wait(t, flushAsync(c2)); err != nil {
				t.Fatal(err)
			}
			closeNow(t, c2, 0)
			if got := srv.storedCount() - len(srv.storedFor("a-run")) - len(srv.storedFor("a-after")); got != 0 {
				t.Fatalf("the next process sent %d of tenant b's events", got)
			}
		})
	}
}

// logged reports whether a record's message or error holds text.
func (h *recordHandler) logged(text string) bool {
	return slices.ContainsFunc(h.messages(), func(m string) bool { return strings.Contains(m, text) })
}

// messages returns each record's message and attributes as one line.
func (h *recordHandler) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.Key + "=" + a.Value.String()); return true })
		out = append(out, b.String())
	}
	return out
}
