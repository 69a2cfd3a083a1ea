package bus

import (
	"strings"
	"testing"
	"time"
)

// MissedSlot reads back the slot of every ID MissedRunID makes (also the
// hashed ones of long job names), and refuses every other ID.
func TestMissedSlot(t *testing.T) {
	slot := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for _, job := range []string{"etl", "a@b", strings.Repeat("x", 300)} {
		if got, ok := MissedSlot(MissedRunID(job, slot)); !ok || !got.Equal(slot) {
			t.Errorf("job %.10q: %v %v", job, got, ok)
		}
	}
	for _, id := range []string{"", "etl@1", "missed:", "missed:etl", "missed:etl@", "missed:etl@x", "missed:etl@99999999999999999999"} {
		if _, ok := MissedSlot(id); ok {
			t.Errorf("%q read as a missed run", id)
		}
	}
}

func FuzzMissedSlot(f *testing.F) {
	f.Add("etl", int64(1_800_000_000), "missed:etl@1")
	f.Fuzz(func(t *testing.T, job string, sec int64, id string) {
		MissedSlot(id) // any input: an answer, no panic
		slot := time.Unix(sec, 0)
		if got, ok := MissedSlot(MissedRunID(job, slot)); !ok || !got.Equal(slot) {
			t.Fatalf("job %q slot %v: read back %v %v", job, slot, got, ok)
		}
	})
}
