package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/expect"
)

// The snapshot's section of the findings not yet marked reads back what
// it wrote, per tenant; a finding of a kind this version does not know (a
// later version's) is passed over, and the rest still restores.
func TestFoundSectionReadsBack(t *testing.T) {
	t.Parallel()
	newX := func() *expectations {
		x, err := newExpectations("", alert.NewFileRules(filepath.Join(t.TempDir(), "e.json")), time.Second, apollo.SystemClock, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	x := newX()
	x.live.Store(true)
	x.mu.Lock()
	for _, tenant := range tenants {
		x.queueLocked([]expect.Event{
			{Kind: expect.KindTooShort, Tenant: tenant, Job: "quick", TaskID: "q-" + tenant, Slot: at, At: at, Count: 1, Detail: "succeeded in 1ms"},
			{Kind: expect.KindFlapping, Tenant: tenant, Job: "flappy", TaskID: "f-" + tenant, Slot: at, At: at, Count: 1, Detail: "2 switches"},
			{Kind: expect.KindMissed, Tenant: tenant, Job: "late", Slot: at, At: at, Count: 1}, // not marked on a run: not kept
		})
	}
	x.mu.Unlock()
	var buf bytes.Buffer
	if err := x.writeFound(&buf); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(buf.String(), `"pending":[`, `"pending":[{"Kind":"of_a_later_version","Tenant":"acme","TaskID":"x"},`, 1)
	y := newX()
	if err := y.readFound(strings.NewReader(src)); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range tenants {
		if ev, ok := y.unmarked[runMark{tenant, "q-" + tenant, "too_short"}]; !ok || ev.Job != "quick" || !ev.Slot.Equal(at) {
			t.Errorf("tenant %s: too_short read back as %+v (%v)", tenant, ev, ok)
		}
		if f := y.flaps[jobRef{tenant, "flappy"}]; f == nil || f.found == nil || f.found.TaskID != "f-"+tenant {
			t.Errorf("tenant %s: flapping read back as %+v", tenant, f)
		}
	}
	if len(y.unmarked) != len(tenants) || len(y.flaps) != len(tenants) {
		t.Errorf("read back %d too_short and %d flapping, want %d of each", len(y.unmarked), len(y.flaps), len(tenants))
	}
}
