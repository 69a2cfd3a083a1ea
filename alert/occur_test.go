package alert_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/rules"
)

// ON: missed (and the other occurrences) fire on what job expectations
// find, for the jobs under the rule's prefix and in the rule's tenant
// only; an ON: failed rule does not fire on them.
func TestOccurrenceFiresEventRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `RULE cron_missed task_prefix: "cron." ON: missed, too_often NOTIFY: ops
RULE failures task_prefix: "" ON: failed NOTIFY: ops`, newTable(), nil)
	f.eng.SetRules("acme", parse(t, `RULE acme_short task_prefix: "" ON: too_short NOTIFY: ops`))
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	slot := t0.Add(-10 * time.Minute)
	f.eng.Occur(alert.Occurrence{Tenant: "", Job: "other", Kind: rules.OccurrenceMissed, At: slot})      // not under cron.
	f.eng.Occur(alert.Occurrence{Tenant: "acme", Job: "cron.a", Kind: rules.OccurrenceMissed, At: slot}) // acme watches too_short only
	f.eng.Occur(alert.Occurrence{Tenant: "", Job: "cron.backup", Kind: rules.OccurrenceMissed, At: slot, Detail: "no run started by 02:40"})
	n := f.sink.Wait(t, testwait.Timeout(t))
	if n.Kind != firing || n.Alert.Rule != "cron_missed" || n.Alert.Tenant != "" || n.Alert.Summary != "cron.backup missed: no run started by 02:40" ||
		n.Alert.Expr != "on missed, too_often" {
		t.Fatalf("%+v", n)
	}
	f.eng.Occur(alert.Occurrence{Tenant: "acme", Job: "x", Kind: rules.OccurrenceTooShort, Run: "r1", At: t0, Detail: "succeeded in 1s"})
	n = f.sink.Wait(t, testwait.Timeout(t))
	if n.Alert.Tenant != "acme" || n.Alert.Rule != "acme_short" || !strings.HasPrefix(n.Alert.Summary, "x too_short") {
		t.Fatalf("%+v", n)
	}
	f.eng.Stop(context.Background())
	if got := len(f.sink.Notes()); got != 2 {
		t.Fatalf("%d notifications, want 2: %+v", got, f.sink.Notes())
	}
}

// holder is a scripted Holder.
type holder struct {
	mu sync.Mutex
	by map[string][]string // tenant/job -> causes
}

func (h *holder) HeldBy(tenant, job string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.by[tenant+"/"+job])
}

func (h *holder) set(tenant, job string, causes ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.by[tenant+"/"+job] = causes
}

// While etl_extract is missed, the failures of the two jobs below it are
// its echoes: held in an alert of their own, marked "inhibited by
// etl_extract", never notified, not folded into the cause's follow-up.
// The one notification is the cause's. In another tenant the same job
// names are not held.
func TestInhibitedMatchesAreHeld(t *testing.T) {
	t.Parallel()
	h := &holder{by: map[string][]string{}}
	h.set("", "etl_transform", "etl_extract")
	h.set("", "etl_load", "etl_extract")
	const src = `RULE etl task_prefix: "etl_" ON: failed, missed GROUP_WINDOW: 1m NOTIFY: ops`
	f := newFixture(t, src, newTable(), func(o *alert.Options) { o.Holder = h })
	f.eng.SetRules("acme", parse(t, src))
	changes, cancel := f.eng.Subscribe()
	defer cancel()
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	f.eng.Occur(alert.Occurrence{Job: "etl_extract", Kind: rules.OccurrenceMissed, At: t0.Add(-time.Minute), Detail: "no run started by 02:10"})
	n := f.sink.Wait(t, testwait.Timeout(t))
	if n.Kind != firing || !strings.HasPrefix(n.Alert.Summary, "etl_extract missed") || len(n.Alert.InhibitedBy) != 0 {
		t.Fatalf("the cause's notification: %+v", n)
	}
	for _, job := range []string{"etl_transform", "etl_load"} {
		c := finish(nil, "", job, job+"-1", apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
		f.eng.Apply(&c)
	}
	firingNow := f.eng.Alerts("", apollo.AlertFiring)
	if len(firingNow) != 2 {
		t.Fatalf("%d firing alerts, want the cause's and the held one: %+v", len(firingNow), firingNow)
	}
	var held apollo.Alert
	for _, a := range firingNow {
		if len(a.InhibitedBy) > 0 {
			held = a
		} else if a.Count != 1 {
			t.Fatalf("the echoes were folded into the cause's alert: %+v", a)
		}
	}
	if !slices.Equal(held.InhibitedBy, []string{"etl_extract"}) || held.Count != 2 || !strings.Contains(held.Summary, "(inhibited by etl_extract)") {
		t.Fatalf("held alert %+v", held)
	}
	c := finish(nil, "acme", "etl_load", "etl_load-1", apollo.StatusFailed, f.clock.Now().UnixMilli(), 100)
	f.eng.Apply(&c)
	n = f.sink.Wait(t, testwait.Timeout(t))
	if n.Alert.Tenant != "acme" || len(n.Alert.InhibitedBy) != 0 {
		t.Fatalf("acme's failure: %+v", n)
	}
	if !f.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the group timer was not armed")
	}
	f.clock.Advance(2 * time.Minute) // every group's quiet window ends
	for resolved := 0; resolved < 3; {
		if a := <-changes; a.State == apollo.AlertResolved {
			resolved++
		}
	}
	f.eng.Stop(context.Background())
	if got := f.sink.Notes(); len(got) != 2 {
		t.Fatalf("%d notifications, want the cause's and acme's: %+v", len(got), got)
	}
	if st := f.eng.Stats(); st.Inhibited != 2 {
		t.Fatalf("inhibited %d, want 2 (the held group's first match and its follow-up)", st.Inhibited)
	}
}

// A flapping job's own flapping occurrence is not held by its flapping;
// its other matches are.
func TestFlappingHoldsOwnAlertsButNotItself(t *testing.T) {
	t.Parallel()
	h := &holder{by: map[string][]string{}}
	h.set("", "flaky", "flaky")
	f := newFixture(t, `RULE flaps task_prefix: "" ON: flapping NOTIFY: ops
RULE fails task_prefix: "" ON: failed NOTIFY: ops`, newTable(), func(o *alert.Options) { o.Holder = h })
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	c := finish(nil, "", "flaky", "r1", apollo.StatusFailed, t0.UnixMilli(), 100)
	f.eng.Apply(&c)
	f.eng.Occur(alert.Occurrence{Job: "flaky", Kind: rules.OccurrenceFlapping, At: t0})
	n := f.sink.Wait(t, testwait.Timeout(t))
	if n.Alert.Rule != "flaps" {
		t.Fatalf("%+v", n)
	}
	f.eng.Stop(context.Background())
	if got := len(f.sink.Notes()); got != 1 {
		t.Fatalf("%d notifications, want only the flapping one: %+v", got, f.sink.Notes())
	}
}

// A rate rule's alert of one job (BY: name) is held while the job is an
// echo, marked with its cause, and told once it is not.
func TestInhibitedRateAlertToldWhenReleased(t *testing.T) {
	t.Parallel()
	h := &holder{by: map[string][]string{}}
	h.set("", "etl_load", "etl_extract")
	tb := newTable()
	tb.set("etl_load", failing(1, 1))
	f := newFixture(t, `RULE loads task_prefix: "etl_" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: ops`, tb,
		func(o *alert.Options) { o.Holder = h })
	f.eval(10 * time.Second)
	f.expectSent()
	if a := f.only("", apollo.AlertFiring); !slices.Equal(a.InhibitedBy, []string{"etl_extract"}) {
		t.Fatalf("%+v", a)
	}
	h.set("", "etl_load")
	f.eval(10 * time.Second)
	if ns := f.expectSent(firing); len(ns[0].Alert.InhibitedBy) != 0 {
		t.Fatalf("%+v", ns[0])
	}
	if a := f.only("", apollo.AlertFiring); len(a.InhibitedBy) != 0 {
		t.Fatalf("still marked: %+v", a)
	}
}
