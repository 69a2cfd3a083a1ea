package alerttest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// RunStateStore checks that a StateStore starts empty, gives back what
// was saved (alerts with their marks, silences), and that a later save
// replaces an earlier one. newStore returns an empty store each call.
func RunStateStore(t *testing.T, newStore func(t *testing.T) alert.StateStore) {
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	full := alert.State{
		Alerts: []alert.StoredAlert{
			{Alert: apollo.Alert{ID: "a1", Tenant: "t", Rule: "r", Group: "batch_", State: apollo.AlertFiring,
				Severity: apollo.SeverityCritical, Labels: map[string]string{"team": "data"}, Summary: "failed_rate 0.2 > 0.1",
				Value: 0.2, Channels: []string{"ops"}, StartedAt: at, FiredAt: at.Add(time.Minute), AckedBy: "ann", AckedAt: at.Add(2 * time.Minute)},
				FiringSent: true, LastSentAt: at.Add(time.Minute), LastEval: at.Add(3 * time.Minute)},
			{Alert: apollo.Alert{ID: "e1", Rule: "ev", Group: "etl_", State: apollo.AlertFiring, Count: 3, StartedAt: at, FiredAt: at},
				Event: true, GroupEnds: at.Add(time.Minute), FirstTs: at.UnixMilli(), Names: map[string]int64{"etl_a": 2, "etl_b": 1}, FiringSent: true},
			{Alert: apollo.Alert{ID: "r1", Rule: "r", Group: "x", State: apollo.AlertResolved, StartedAt: at, ResolvedAt: at.Add(time.Hour)}},
		},
		Silences: []alert.Silence{{ID: "s1", Tenant: "t", Rule: "r", StartsAt: at, EndsAt: at.Add(time.Hour),
			CreatedBy: "ann", CreatedAt: at, Comment: "deploy"}},
	}
	t.Run("EmptyAtFirst", func(t *testing.T) {
		s, err := newStore(t).Load(ctx)
		if err != nil || len(s.Alerts) != 0 || len(s.Silences) != 0 {
			t.Fatalf("a new store loaded %+v, %v; want an empty state", s, err)
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		st := newStore(t)
		if err := st.Save(ctx, full); err != nil {
			t.Fatal(err)
		}
		got, err := st.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := canon(t, got), canon(t, full); a != b {
			t.Fatalf("loaded\n%s\nwant\n%s", a, b)
		}
	})
	t.Run("SaveReplaces", func(t *testing.T) {
		st := newStore(t)
		if err := st.Save(ctx, full); err != nil {
			t.Fatal(err)
		}
		less := alert.State{Alerts: full.Alerts[:1]}
		if err := st.Save(ctx, less); err != nil {
			t.Fatal(err)
		}
		got, err := st.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := canon(t, got), canon(t, less); a != b {
			t.Fatalf("after a second save loaded\n%s\nwant\n%s", a, b)
		}
	})
}

// canon is a State as JSON, alerts and silences in ID order: a store
// may keep them in any order, the engine does not care.
func canon(t *testing.T, s alert.State) string {
	t.Helper()
	s.Alerts = slices.Clone(s.Alerts)
	s.Silences = slices.Clone(s.Silences)
	slices.SortFunc(s.Alerts, func(a, b alert.StoredAlert) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.Silences, func(a, b alert.Silence) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(v)
	return string(b)
}
