package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// What people wrote (silences, acks) is saved by whichever alert process
// took the command, leader or not, field by field: a process that missed
// a change leaves it alone, the leader's alerts carry an ack it has not
// seen yet, and a process that takes the lease writes the alerts it saved
// while another led.
func TestAlertStatePeoplesWrites(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	la := redisstore.NewLease(c, prefix, "a", time.Minute)
	lb := redisstore.NewLease(c, prefix, "b", time.Minute)
	sa := redisstore.NewAlertState(c, prefix, la)
	sb := redisstore.NewAlertState(c, prefix, lb)
	la.Start(ctx)
	lb.Start(ctx)
	defer la.Stop(context.Background())
	defer lb.Stop(context.Background())
	if !la.Held() || lb.Held() {
		t.Fatal("a must lead")
	}
	for _, s := range []*redisstore.AlertState{sa, sb} {
		if _, err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fresh := func() alert.State {
		t.Helper()
		st, err := redisstore.NewAlertState(c, prefix, nil).Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	firing := func(id string, started time.Time) alert.StoredAlert {
		return alert.StoredAlert{Alert: apollo.Alert{ID: id, Tenant: "acme", Rule: "r", Group: "batch_", State: apollo.AlertFiring, StartedAt: started}}
	}
	sil := alert.Silence{ID: "s1", Tenant: "globex", Rule: "g", StartsAt: at, EndsAt: at.Add(time.Hour), CreatedBy: "bob", Comment: "deploy"}

	// b, which does not lead, takes an ack and a silence.
	acked := firing("b1", at)
	acked.AckedBy, acked.AckedAt = "ann", at.Add(time.Minute)
	if err := sb.Save(ctx, alert.State{Alerts: []alert.StoredAlert{acked}, Silences: []alert.Silence{sil}}); err != nil {
		t.Fatal(err)
	}
	if st := fresh(); len(st.Alerts) != 0 || len(st.Silences) != 1 || st.Silences[0].ID != "s1" {
		t.Fatalf("after b's save: %+v; want b's silence and no alerts (b does not lead)", st)
	}
	// a, the leader, missed both: its save keeps them, and its own
	// episode of the group shows the ack.
	if err := sa.Save(ctx, alert.State{Alerts: []alert.StoredAlert{firing("a1", at.Add(-time.Second))}}); err != nil {
		t.Fatal(err)
	}
	st := fresh()
	if len(st.Silences) != 1 || len(st.Alerts) != 1 || st.Alerts[0].ID != "a1" || st.Alerts[0].AckedBy != "ann" || !st.Alerts[0].AckedAt.Equal(acked.AckedAt) {
		t.Fatalf("after a's save: %+v; want a1 acknowledged by ann and the silence", st)
	}
	// A later episode of the same group is not the one acknowledged.
	if err := sa.Save(ctx, alert.State{Alerts: []alert.StoredAlert{firing("a2", at.Add(time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	if st := fresh(); st.Alerts[0].AckedBy != "" {
		t.Fatalf("a later episode took the ack: %+v", st.Alerts[0])
	}
	// b's alert resolves and the silence is removed: both leave Redis.
	resolved := acked
	resolved.State = apollo.AlertResolved
	if err := sb.Save(ctx, alert.State{Alerts: []alert.StoredAlert{resolved}}); err != nil {
		t.Fatal(err)
	}
	if n := c.HLen(ctx, prefix+":alert:acks").Val() + c.HLen(ctx, prefix+":alert:silences").Val(); n != 0 {
		t.Fatalf("%d acks and silences left after they ended", n)
	}
	if ttl := c.TTL(ctx, prefix+":alert:state").Val(); ttl <= 0 {
		t.Errorf("the alerts key has TTL %v; computed state expires", ttl)
	}
	// a stops; b takes the lease and writes the alerts of its last save.
	la.Stop(context.Background())
	lb.Renew(ctx)
	if st := fresh(); !lb.Held() || len(st.Alerts) != 1 || st.Alerts[0].ID != "b1" || st.Alerts[0].State != apollo.AlertResolved {
		t.Fatalf("after b took the lease: %+v", st.Alerts)
	}
}

// An engine in a process that does not lead confirms a silence only once
// it is in Redis (before, its save was skipped and the silence lived in
// memory only).
func TestSilenceOfAFollowerIsDurable(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	c.Set(ctx, prefix+":alert:leader", "someone else", time.Minute)
	lease := redisstore.NewLease(c, prefix, "me", time.Minute)
	store, err := redisstore.NewStore(redisstore.Options{Client: c, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	e, err := alert.New(alert.Options{Store: store, Sender: discard{}, State: redisstore.NewAlertState(c, prefix, lease)})
	if err != nil {
		t.Fatal(err)
	}
	lease.Start(ctx)
	defer lease.Stop(context.Background())
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	for _, tenant := range []string{"acme", "globex"} {
		if _, err := e.AddSilence(tenant, alert.Silence{Rule: tenant + "_r", EndsAt: time.Now().Add(time.Hour), CreatedBy: "ann", Comment: "deploy"}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := redisstore.NewAlertState(c, prefix, nil).Load(ctx)
	if err != nil || len(st.Silences) != 2 {
		t.Fatalf("in Redis when AddSilence returned: %+v, %v", st.Silences, err)
	}
}

type discard struct{}

func (discard) Send(apollo.Notification) {}

// A damaged silence or ack is an error that says what to delete, not a
// silence or an ack quietly lost.
func TestAlertStateDamagedFields(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	c.Set(ctx, prefix+":alert:state", `{"alerts":[{"id":"a1","tenant":"acme","rule":"r","group":"g","state":"firing"}]}`, time.Minute)
	for _, key := range []string{"silences", "acks"} {
		field := `["acme","r","g"]`
		c.HSet(ctx, prefix+":alert:"+key, field, "{not json")
		_, err := redisstore.NewAlertState(c, prefix, nil).Load(ctx)
		if err == nil || !strings.Contains(err.Error(), "delete the field") {
			t.Errorf("a damaged %s field: %v", key, err)
		}
		c.Del(ctx, prefix+":alert:"+key)
	}
}
