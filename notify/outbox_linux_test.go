package notify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A full disk tears an append in the middle of the file: the write puts
// part of the line down and fails. The notification is still sent (the
// outbox only failed to record it), and once the disk has room again the
// next entries are appended. The torn part must not become the start of
// the next line, or the next process refuses to start on an outbox with a
// bad line in the middle ("move the file away"), and the notifications it
// owes are lost with it. A file size limit (RLIMIT_FSIZE) tears the write
// as a full disk does: the bytes that fit, then an error.
//
// Not parallel: the limit holds for the whole process.
func TestOutboxAppendTornByAFullDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	ob := openOutbox(t, path)
	kept, err := ob.Owe("hook", t0, tenantNote("kept", "team-a"))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	full := was
	full.Cur = uint64(fi.Size()) + 40 // room for part of the next line
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	big := tenantNote("torn", "team-b")
	big.Alert.Summary = strings.Repeat("s", 4096)
	_, tornErr := ob.Owe("hook", t0, big)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(tornErr, syscall.EFBIG) {
		t.Fatalf("an append past the limit: %v, want the limit's EFBIG", tornErr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("after the failed append the file has %d bytes, had %d: %v", fi.Size(), size, err)
	}
	after, err := ob.Owe("hook", t0, tenantNote("after", "team-b"))
	if err != nil {
		t.Fatal(err)
	}
	ob.Close()

	ob = openOutbox(t, path)
	owed := ob.Owed()
	if len(owed) != 2 || owed[0].ID != kept || owed[1].ID != after ||
		owed[0].Notification.Alert.Tenant != "team-a" || owed[1].Notification.Alert.Tenant != "team-b" {
		t.Fatalf("owed after a torn append: %+v; want %d (team-a) and %d (team-b)", owed, kept, after)
	}
}
