//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLeaseSpool(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if a.dir == b.dir {
		t.Fatalf("two processes share %s", a.dir)
	}
	// b leaves events behind and ends; a still runs. The next process
	// takes b's slot, whose files make it no orphan of anyone else, and a's
	// slot stays a's.
	os.MkdirAll(b.dir, 0o700)
	os.WriteFile(filepath.Join(b.dir, "0000000000000001-0000.ndjson"), []byte("{}\n"), 0o600)
	b.release()
	c, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if c.dir != b.dir || len(c.orphans) != 0 {
		t.Errorf("got slot %s and orphans %v, want b's slot %s and none", c.dir, c.orphans, b.dir)
	}
	// Once a has ended too, the next process takes the first slot, and
	// sends what b left in the other, free one.
	c.release()
	a.release()
	d, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if d.dir != a.dir || len(d.orphans) != 1 || d.orphans[0] != b.dir {
		t.Errorf("got slot %s and orphans %v, want %s and [%s]", d.dir, d.orphans, a.dir, b.dir)
	}
	d.release()

	// Every slot busy: no spool, said plainly.
	root = t.TempDir()
	var all []*spoolLease
	for range spoolSlots {
		l, err := leaseSpool(root)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	if _, err := leaseSpool(root); err == nil {
		t.Errorf("process %d got a slot", spoolSlots+1)
	}
	for _, l := range all {
		l.release()
	}
}
