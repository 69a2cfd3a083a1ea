package alert_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// failedChange is a run of job failing, made by the record of lsn.
func failedChange(tenant, job, id string, lsn uint64) *apollo.Change {
	return &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: job, Tenant: tenant, Status: apollo.StatusFailed, Ts: t0.UnixMilli()}},
		Prev:   apollo.Before{Name: job, Status: apollo.StatusRunning},
		Task:   apollo.Task{TaskID: id, Name: job, Tenant: tenant, Status: apollo.StatusFailed},
		LSN:    lsn,
	}
}

// A restored engine saves the bus's mark and the changes above it that
// counted; restored from that, it skips those when the replay hands them
// again and counts the others, in each tenant.
func TestRestoredEngineCountsEachReplayedChangeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	state := alert.NewMemoryState()
	src := "RULE failed task_prefix: \"etl\" ON: failed NOTIFY: ops\n"
	engine := func(mark uint64) (*fixture, uint64) {
		f := newFixture(t, "", newTable(), func(o *alert.Options) { o.State = state })
		for _, tenant := range []string{"acme", "globex"} {
			f.eng.SetRules(tenant, parse(t, src))
		}
		from, err := f.eng.Restore(ctx, func() uint64 { return mark })
		if err != nil {
			t.Fatal(err)
		}
		return f, from
	}
	f, from := engine(7)
	if from != 0 {
		t.Fatalf("no saved state: the replay tells from %d, want 0 (all of it)", from)
	}
	for _, tenant := range []string{"acme", "globex"} {
		f.eng.Apply(failedChange(tenant, "etl_a", "r1", 9))
	}
	if err := f.eng.Save(ctx); err != nil {
		t.Fatal(err)
	}
	f, from = engine(8)
	if from != 7 {
		t.Fatalf("the replay tells from %d, want the saved mark 7", from)
	}
	for _, tenant := range []string{"acme", "globex"} {
		f.eng.Apply(failedChange(tenant, "etl_a", "r1", 9)) // heard of before: in the saved group
		f.eng.Apply(failedChange(tenant, "etl_b", "r2", 10))
	}
	if err := f.eng.Save(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := state.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Live == nil || s.Live.Watermark != 8 || len(s.Live.Heard) != 2 || s.Live.Heard[0] != 9 || s.Live.Heard[1] != 10 {
		t.Fatalf("saved mark %+v, want watermark 8, heard [9 10]", s.Live)
	}
	seen := map[string]bool{}
	for _, a := range s.Alerts {
		seen[a.Tenant] = true
		if a.Names["etl_a"] != 1 || a.Names["etl_b"] != 1 {
			t.Errorf("tenant %s: group counts %v, want etl_a and etl_b once each", a.Tenant, a.Names)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("alerts of %v, want both tenants", seen)
	}
	// A state saved by an engine that kept no mark: the replay tells nothing.
	old := alert.NewMemoryState()
	if err := old.Save(ctx, alert.State{Alerts: s.Alerts}); err != nil {
		t.Fatal(err)
	}
	state = old
	if _, from = engine(8); from != math.MaxUint64 {
		t.Fatalf("a state without a mark: the replay tells from %d, want none of it", from)
	}
}

// FileState keeps the mark beside the state file, which stays the one the
// release before reads; a state file written since without a mark (that
// release, after a downgrade) leaves the mark unused.
func TestFileStateKeepsTheMarkBeside(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "alerts.json")
	st := alert.NewFileState(path)
	saved := alert.State{Silences: []alert.Silence{{ID: "s1", Rule: "r", StartsAt: t0, EndsAt: t0.Add(time.Hour)}},
		Live: &alert.LiveMark{Watermark: 7, Heard: []uint64{9}}}
	if err := st.Save(ctx, saved); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "live") || strings.Contains(string(b), "watermark") {
		t.Fatalf("the state file holds the mark, which the release before refuses: %s", b)
	}
	got, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Live == nil || got.Live.Watermark != 7 || len(got.Live.Heard) != 1 || got.Live.Heard[0] != 9 {
		t.Fatalf("mark read back %+v, want watermark 7, heard [9]", got.Live)
	}
	// What the release before writes: the same file format, no mark.
	if err := os.WriteFile(path, []byte(`{"version":1,"alerts":[],"silences":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err = st.Load(ctx); err != nil || got.Live != nil {
		t.Fatalf("a state file written since the mark: mark %+v (err %v), want none", got.Live, err)
	}
}

// An engine that hears the bus through a change log (the three-process
// mode) saves where it had got to with the mark, reads on from there, and
// forgets the LSNs it heard when the bus's log starts over (a new data
// directory): a change of the new log with an LSN heard before counts.
func TestRestoreFeedReadsOnAndForgetsAnotherLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	state := alert.NewMemoryState()
	src := "RULE failed task_prefix: \"etl\" ON: failed NOTIFY: ops\n"
	engine := func(pos string) (*fixture, alert.LiveMark) {
		f := newFixture(t, "", newTable(), func(o *alert.Options) { o.State = state })
		for _, tenant := range []string{"acme", "globex"} {
			f.eng.SetRules(tenant, parse(t, src))
		}
		m, err := f.eng.RestoreFeed(ctx, func() (uint64, string) { return 8, pos })
		if err != nil {
			t.Fatal(err)
		}
		return f, m
	}
	f, m := engine("5-0@e1")
	if m.Feed != "0" {
		t.Fatalf("no saved state: read from %q, want the whole log", m.Feed)
	}
	for _, tenant := range []string{"acme", "globex"} {
		f.eng.Apply(failedChange(tenant, "etl_a", "r1", 9))
	}
	if err := f.eng.Save(ctx); err != nil {
		t.Fatal(err)
	}
	f, m = engine("6-0@e1")
	if m.Watermark != 8 || m.Feed != "5-0@e1" {
		t.Fatalf("restored %+v, want watermark 8 from 5-0@e1", m)
	}
	f.eng.ForgetHeard() // the bus's log started over
	for _, tenant := range []string{"acme", "globex"} {
		f.eng.Apply(failedChange(tenant, "etl_a", "n1", 9)) // the new log's LSN 9: news
	}
	if err := f.eng.Save(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := state.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range s.Alerts {
		seen[a.Tenant] = true
		if a.Names["etl_a"] != 2 {
			t.Errorf("tenant %s: etl_a counted %d times, want 2 (one failure of each log)", a.Tenant, a.Names["etl_a"])
		}
	}
	if len(seen) != 2 || s.Live == nil || s.Live.Feed != "6-0@e1" {
		t.Fatalf("alerts of %v, mark %+v; want both tenants, read to 6-0@e1", seen, s.Live)
	}
	// A state saved without a mark reads what is written from now on.
	old := alert.NewMemoryState()
	if err := old.Save(ctx, alert.State{Alerts: s.Alerts}); err != nil {
		t.Fatal(err)
	}
	state = old
	if _, m = engine(""); m.Feed != "$" {
		t.Fatalf("a state without a mark: read from %q, want $", m.Feed)
	}
}
