package alert_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// failingState is a MemoryState whose saves fail while fail is set, as a
// full disk or an unreachable Redis would.
type failingState struct {
	alert.MemoryState
	fail atomic.Bool
}

func (s *failingState) Save(ctx context.Context, st alert.State) error {
	if s.fail.Load() {
		return errors.New("disk full")
	}
	return s.MemoryState.Save(ctx, st)
}

// A person's write is saved before the engine confirms it (invariant 9):
// what the API answered is in the store at once, and a write that cannot
// be saved is refused and undone, never kept in memory only.
func TestSilencesAreSavedBeforeTheyAreConfirmed(t *testing.T) {
	t.Parallel()
	st := &failingState{}
	f := newFixture(t, `RULE r task_prefix: "batch_" THRESHOLD: failed > 0 NOTIFY: ops`, newTable(), func(o *alert.Options) { o.State = st })
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	saved := func() []alert.Silence {
		t.Helper()
		s, err := st.Load(bg)
		if err != nil {
			t.Fatal(err)
		}
		return s.Silences
	}
	sil := alert.Silence{Rule: "r", EndsAt: t0.Add(time.Hour), CreatedBy: "ann", Comment: "deploy"}
	kept, err := f.eng.AddSilence("acme", sil)
	if err != nil {
		t.Fatal(err)
	}
	if s := saved(); len(s) != 1 || s[0].ID != kept.ID || s[0].Tenant != "acme" {
		t.Fatalf("saved when AddSilence returned: %+v", s)
	}

	st.fail.Store(true)
	sil.Rule = "other"
	_, err = f.eng.AddSilence("globex", sil)
	if apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Fatalf("AddSilence with a failing store: %v, want unavailable", err)
	}
	if s := f.eng.Silences("globex"); len(s) != 0 {
		t.Fatalf("a silence that was not saved is in force: %+v", s)
	}
	if err := f.eng.RemoveSilence("acme", kept.ID); apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Fatalf("RemoveSilence with a failing store: %v, want unavailable", err)
	}
	if s := f.eng.Silences("acme"); len(s) != 1 {
		t.Fatalf("a removal that was not saved took effect: %+v", s)
	}

	st.fail.Store(false)
	if err := f.eng.RemoveSilence("acme", kept.ID); err != nil {
		t.Fatal(err)
	}
	if s := saved(); len(s) != 0 {
		t.Fatalf("saved when RemoveSilence returned: %+v", s)
	}
}

// An ack is saved before Ack returns; one that cannot be saved is undone,
// and repeats go on as if nobody had acknowledged.
func TestAcksAreSavedBeforeTheyAreConfirmed(t *testing.T) {
	t.Parallel()
	st := &failingState{}
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" THRESHOLD: failed > 0 NOTIFY: ops`, tb, func(o *alert.Options) { o.State = st })
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	id := f.only("", apollo.AlertFiring).ID

	st.fail.Store(true)
	if err := f.eng.Ack(bg, "", id, "ann"); apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Fatalf("Ack with a failing store: %v, want unavailable", err)
	}
	if a := f.only("", apollo.AlertFiring); a.AckedBy != "" {
		t.Fatalf("an ack that was not saved holds: %+v", a)
	}
	st.fail.Store(false)
	if err := f.eng.Ack(bg, "", id, "bob"); err != nil {
		t.Fatal(err)
	}
	saved, err := st.Load(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Alerts) != 1 || saved.Alerts[0].AckedBy != "bob" {
		t.Fatalf("saved when Ack returned: %+v", saved.Alerts)
	}
	f.eval(alert.DefaultRepeatInterval)
	f.expectSent() // acknowledged: no repeat
}
