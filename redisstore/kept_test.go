package redisstore_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// Redis loses everything (a restart without persistence): each alert
// process's Keeper notices at its next check, and the process writes back
// the rules, alerts, acks and silences it holds, of every tenant, without
// overwriting what another process wrote back first. A Redis that merely
// answers again, or a check with nothing lost, writes nothing.
func TestKeeperRefillsWhatRedisLost(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	state := redisstore.NewAlertState(c, prefix, nil)
	rules := redisstore.NewRules(c, prefix)
	srcs := map[string][]byte{"acme": []byte("RULE a task_prefix: \"a\" ON: failed\n"), "globex": []byte("RULE g task_prefix: \"g\" ON: failed\n")}
	for tenant, src := range srcs {
		if err := rules.Save(ctx, tenant, src); err != nil {
			t.Fatal(err)
		}
	}
	acked := alert.StoredAlert{Alert: apollo.Alert{ID: "x1", Tenant: "acme", Rule: "a", Group: "a", State: apollo.AlertFiring,
		StartedAt: at, AckedBy: "ann", AckedAt: at.Add(time.Minute)}}
	other := alert.StoredAlert{Alert: apollo.Alert{ID: "y1", Tenant: "globex", Rule: "g", Group: "g", State: apollo.AlertFiring, StartedAt: at}}
	sil := alert.Silence{ID: "s1", Tenant: "globex", Rule: "g", StartsAt: at, EndsAt: at.Add(time.Hour), CreatedBy: "bob"}
	if err := state.Save(ctx, alert.State{Alerts: []alert.StoredAlert{acked, other}, Silences: []alert.Silence{sil}}); err != nil {
		t.Fatal(err)
	}

	refills := 0
	k := redisstore.NewKeeper(c, prefix, "a", time.Hour, quiet, func(ctx context.Context) error {
		refills++
		if err := state.Refill(ctx); err != nil {
			return err
		}
		return rules.Refill(ctx, srcs)
	})
	k.Check(ctx)
	k.Check(ctx)
	if refills != 0 {
		t.Fatalf("%d refills with nothing lost", refills)
	}

	if err := redistest.Delete(ctx, c, prefix); err != nil {
		t.Fatal(err)
	}
	// Another process wrote globex's rules back first, newer than ours.
	newer := []byte("RULE g2 task_prefix: \"g\" ON: failed\n")
	if err := rules.Save(ctx, "globex", newer); err != nil {
		t.Fatal(err)
	}
	k.Check(ctx)
	k.Check(ctx)
	if refills != 1 {
		t.Fatalf("%d refills after one loss, want 1", refills)
	}
	st, err := redisstore.NewAlertState(c, prefix, nil).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Alerts) != 2 || len(st.Silences) != 1 || st.Silences[0].ID != "s1" {
		t.Fatalf("after the refill: %+v, want both tenants' alerts and globex's silence", st)
	}
	for _, a := range st.Alerts {
		if (a.AckedBy == "ann") != (a.Tenant == "acme") {
			t.Fatalf("after the refill: %+v, want acme's alert acknowledged by ann", a)
		}
	}
	got, err := rules.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(got["acme"]) != string(srcs["acme"]) || string(got["globex"]) != string(newer) {
		t.Fatalf("rules after the refill: %q", got)
	}
}
