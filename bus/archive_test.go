package bus

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

func TestFileArchive(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	dir := t.TempDir()
	a, err := OpenFileArchive(dir, 48*time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Put(&apollo.Task{TaskID: "x", Tenant: "acme", Status: apollo.StatusFailed})
	a.Put(&apollo.Task{TaskID: "x", Tenant: "globex", Status: apollo.StatusSuccess})
	clock.Advance(24 * time.Hour)
	a.Put(&apollo.Task{TaskID: "y", Status: apollo.StatusTimeout, History: []apollo.Record{{Kind: apollo.KindTimeout}}})
	if got, _ := a.Get("acme", "x"); got == nil || got.Status != apollo.StatusFailed {
		t.Errorf("acme/x = %+v", got)
	}
	if got, _ := a.Get("globex", "x"); got == nil || got.Status != apollo.StatusSuccess {
		t.Errorf("globex/x = %+v", got)
	}
	if got, _ := a.Get("", "y"); got == nil || len(got.History) != 1 {
		t.Errorf("y = %+v", got)
	}
	if got, err := a.Get("", "zzz"); got != nil || err != nil {
		t.Errorf("unknown = %+v, %v", got, err)
	}
	clock.Advance(72 * time.Hour)
	a.Put(&apollo.Task{TaskID: "z"})
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Errorf("files after pruning: %v", files)
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatal(err)
	}
}
