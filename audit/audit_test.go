package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

func TestLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	l, err := Open(dir, 3, clock)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range []string{"a1", "a2", "a3", "a4"} {
		clock.Advance(time.Second)
		l.Record(Entry{Tenant: "t", Actor: "ops", Action: a, Target: string(rune('0' + i))})
	}
	l.Record(Entry{Tenant: "other", Actor: "x", Action: "b"})
	got := l.List("t", 10)
	if len(got) != 2 || got[0].Action != "a4" || got[1].Action != "a3" {
		t.Fatalf("ring holds %+v", got)
	}
	if !got[0].At.Equal(time.Unix(1004, 0)) {
		t.Errorf("time %v", got[0].At)
	}
	if len(l.List("t", 1)) != 1 {
		t.Error("limit ignored")
	}
	l.Close()
	f, _ := os.Open(filepath.Join(dir, "audit.jsonl"))
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
	}
	if n != 5 {
		t.Errorf("file has %d entries, want 5 (the ring forgets, the file does not)", n)
	}
}
