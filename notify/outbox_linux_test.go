package notify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/apollo-11/apollo/internal/fullfile"
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
	big := tenantNote("torn", "team-b")
	big.Alert.Summary = strings.Repeat("s", 4096)
	var tornErr error
	fullfile.Limit(t, uint64(fi.Size())+40, func() { // room for part of the next line
		_, tornErr = ob.Owe("hook", t0, big)
	})
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

// The outbox rewrites its file once it holds many more lines than
// entries owed. A rewrite that fails (a full disk) must leave the outbox
// working: appends go on to the file there is, and once the disk has room
// again notifications are recorded as before. The file was closed before
// the rewrite was tried, so every later Owe and Settle failed with "the
// outbox is closed" until the process restarted: what was owed meanwhile
// was lost to a crash.
//
// Not parallel: the file size limit holds for the whole process.
func TestOutboxRewriteFailureKeepsTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	ob := openOutbox(t, path)
	big := tenantNote("kept", "team-a")
	big.Alert.Summary = strings.Repeat("s", 4096)
	kept, err := ob.Owe("hook", t0, big)
	if err != nil {
		t.Fatal(err)
	}
	for ob.lines < compactAfter-1 {
		id, err := ob.Owe("hook", t0, tenantNote("x", "team-b"))
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Settle(id); err != nil {
			t.Fatal(err)
		}
	}
	last, err := ob.Owe("hook", t0, tenantNote("last", "team-b"))
	if err != nil {
		t.Fatal(err)
	}
	var settleErr error
	fullfile.Limit(t, 1024, func() { // less than the entry kept: the rewrite cannot write it
		settleErr = ob.Settle(last) // past compactAfter lines: a rewrite
	})
	if !errors.Is(settleErr, syscall.EFBIG) {
		t.Fatalf("settling with the disk full: %v, want the limit's EFBIG", settleErr)
	}
	after, err := ob.Owe("hook", t0, tenantNote("after", "team-b"))
	if err != nil {
		t.Fatalf("an Owe once the disk has room again: %v", err)
	}
	ob.Close()

	ob = openOutbox(t, path)
	var ids []uint64
	for _, e := range ob.Owed() {
		ids = append(ids, e.ID)
	}
	// The settle of last could not be written either while the disk was
	// full: it is owed again, and goes out twice rather than never.
	if len(ids) != 3 || ids[0] != kept || ids[1] != last || ids[2] != after {
		t.Fatalf("owed after a failed rewrite: %v; want %d (team-a), %d and %d (team-b)", ids, kept, last, after)
	}
}
