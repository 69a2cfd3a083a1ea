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

// The section keeps what the evaluator knows of each job, per tenant: a
// job's state of a later version (a problem this one does not know) is
// passed over and the rest still restores; a section without jobs (of
// the version before) restores none.
func TestFoundSectionKeepsJobs(t *testing.T) {
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
	for _, tenant := range tenants {
		set, err := expect.Parse("e.yaml", []byte("expectations:\n  - {job: load, upstream: [extract]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		x.ev.Set(tenant, set, at)
		x.ev.Started(expect.Run{Tenant: tenant, Job: "extract", TaskID: "x-" + tenant, At: at})
		x.ev.Finished(expect.Run{Tenant: tenant, Job: "extract", TaskID: "x-" + tenant, At: at.Add(time.Minute), Status: apollo.StatusFailed})
	}
	var buf bytes.Buffer
	if err := x.writeFound(&buf); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(buf.String(), `"jobs":[`, `"jobs":[{"Tenant":"acme","Job":"extract","Problem":"of_a_later_version"},`, 1)
	y := newX()
	if err := y.readFound(strings.NewReader(src)); err != nil {
		t.Fatal(err)
	}
	if len(y.snapJobs) != len(tenants) {
		t.Fatalf("read back %+v, want one state per tenant", y.snapJobs)
	}
	for _, js := range y.snapJobs {
		if js.Job != "extract" || js.Problem != expect.ProblemFailed || !js.Since.Equal(at.Add(time.Minute)) || !js.LastStart.Equal(at) {
			t.Errorf("read back %+v, want extract failed since %v, started at %v", js, at.Add(time.Minute), at)
		}
	}
	z := newX()
	if err := z.readFound(strings.NewReader(`{"flaps":[]}`)); err != nil || z.snapJobs != nil {
		t.Errorf("a section without jobs read back %+v (%v), want none", z.snapJobs, err)
	}
}
