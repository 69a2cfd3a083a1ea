package notify

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenFileOutbox: whatever DATA/outbox.jsonl holds, opening it either
// names the line it cannot read, or gives the entries owed; a new entry
// then takes an ID of its own, and a reopen finds every entry owed before
// and the new one.
func FuzzOpenFileOutbox(f *testing.F) {
	f.Add([]byte("{\"owe\":{\"id\":1,\"channel\":\"hook\",\"at\":\"2026-01-01T00:00:00Z\",\"n\":{\"kind\":\"firing\",\"alert\":{\"id\":\"a\",\"tenant\":\"team-a\"}}}}\n{\"settle\":[1]}\n"))
	f.Add([]byte("{\"owe\":{\"id\":18446744073709551615,\"channel\":\"hook\",\"n\":{}}}\n{\"owe\":{\"id\":1,\"channel\":\"x\",\"n\":{}}}\n"))
	f.Add([]byte("{\"owe\":{\"id\":0,\"channel\":\"\",\"n\":{}}}\n{\"settle\":[0,0,7]}\n{\"owe\":{\"id\":2"))
	f.Add([]byte("not json\n{\"settle\":[1]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "outbox.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ob, err := OpenFileOutbox(path)
		if err != nil {
			return // named the line; the file is left as it was
		}
		before := map[uint64]bool{}
		for _, e := range ob.Owed() {
			before[e.ID] = true
		}
		id, err := ob.Owe("hook", t0, tenantNote("new", "team-b"))
		if err != nil {
			t.Fatal(err)
		}
		if before[id] {
			t.Fatalf("a new entry took ID %d, which an entry owed already has", id)
		}
		ob.Close()
		again, err := OpenFileOutbox(path)
		if err != nil {
			t.Fatalf("the outbox it wrote does not open: %v", err)
		}
		defer again.Close()
		after := map[uint64]bool{}
		for _, e := range again.Owed() {
			after[e.ID] = true
		}
		if len(after) != len(before)+1 || !after[id] {
			t.Fatalf("after a reopen %d entries owed (new %d there: %v), want %d", len(after), id, after[id], len(before)+1)
		}
	})
}
