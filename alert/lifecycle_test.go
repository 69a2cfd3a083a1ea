package alert_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

const (
	firing   = apollo.NotifyFiring
	resolved = apollo.NotifyResolved
	repeat   = apollo.NotifyRepeat
	storm    = apollo.NotifyStorm
)

// DURATION needs the condition on every evaluation for that long; one
// false evaluation sends the alert back to inactive, and the next episode
// has a new ID and starts its hold again.
func TestDurationResetByOneFalseEvaluation(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed_rate > 10% DURATION: 30s NOTIFY: ops`, tb, nil)
	tb.set("batch_a", failing(5, 10))
	f.eval(0)
	first := f.only("", apollo.AlertPending)
	f.eval(10 * time.Second)
	f.eval(10 * time.Second) // +20s: held 20s of 30s
	f.only("", apollo.AlertPending)
	tb.set("batch_a", failing(0, 10))
	f.eval(10 * time.Second) // +30s would have fired; one false evaluation resets it
	f.none("", "")
	f.expectSent()
	tb.set("batch_a", failing(5, 10))
	f.eval(10 * time.Second) // +40s: a new episode
	second := f.only("", apollo.AlertPending)
	if second.ID == first.ID || !second.StartedAt.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("the new episode %s started %v; want a new ID, started at +40s", second.ID, second.StartedAt.Sub(t0))
	}
	f.eval(10 * time.Second)
	f.eval(10 * time.Second) // +60s: held 20s
	f.expectSent()
	f.eval(10 * time.Second) // +70s: held 30s
	n := f.expectSent(firing)[0]
	a := f.only("", apollo.AlertFiring)
	if n.Alert.ID != second.ID || a.ID != second.ID || !a.FiredAt.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("fired %+v, notified %s; want episode %s at +70s", a, n.Alert.ID, second.ID)
	}
	if want := "failed_rate 0.5 > 10% for batch_* over 1m"; n.Alert.Summary != want || n.Alert.Value != 0.5 {
		t.Errorf("summary %q value %v, want %q 0.5", n.Alert.Summary, n.Alert.Value, want)
	}
	if n.DedupKey == "" || !slices0(n.Channels, "ops") {
		t.Errorf("notification %+v", n)
	}
}

// DURATION and KEEP are measured in evaluations, not in the wall clock's
// jitter: a ticker that fires a few milliseconds early or late still fires
// a 2m rule at the twelfth evaluation after the one that found the
// condition true (2m, not 2m10s), a 40s rule at the fourth, and resolves a
// KEEP: 30s alert at the third evaluation after the first false one; and
// never one evaluation early.
func TestDurationAndKeepIgnoreTickJitter(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, tc := range []struct {
		name           string
		duration, keep time.Duration
		// jitter is how far tick k is off its due time; first is set for
		// the tick that starts the hold (true, then false).
		jitter func(k int, first bool) time.Duration
	}{
		{"first late, then early", 2 * time.Minute, 30 * time.Second, func(_ int, first bool) time.Duration {
			if first {
				return 4 * ms
			}
			return -3 * ms
		}},
		{"first early, then late", 2 * time.Minute, 30 * time.Second, func(_ int, first bool) time.Duration {
			if first {
				return -3 * ms
			}
			return 4 * ms
		}},
		{"mixed", 2 * time.Minute, 30 * time.Second, func(k int, first bool) time.Duration {
			if first {
				return 7 * ms
			}
			return []time.Duration{-5 * ms, 2 * ms}[k%2]
		}},
		{"40s first late, then early", 40 * time.Second, 20 * time.Second, func(_ int, first bool) time.Duration {
			if first {
				return 8 * ms
			}
			return -2 * ms
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := newTable()
			f := newFixture(t, fmt.Sprintf(`RULE r task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed > 0 DURATION: %gs KEEP: %gs NOTIFY: ops`,
				tc.duration.Seconds(), tc.keep.Seconds()), tb, nil)
			// tick runs evaluation k, due at k×10s, off by its jitter.
			k := 0
			tick := func(first bool) {
				t.Helper()
				now := t0.Add(time.Duration(k)*alert.DefaultInterval + tc.jitter(k, first))
				f.clock.Set(now)
				if err := f.eng.Evaluate(bg, now); err != nil {
					t.Fatal(err)
				}
				k++
			}
			tb.set("batch_a", failing(1, 1))
			for i := range tc.duration / alert.DefaultInterval {
				tick(i == 0)
				f.expectSent()
			}
			tick(false) // DURATION after the first true evaluation
			f.expectSent(firing)
			tb.set("batch_a", failing(0, 1))
			for i := range tc.keep / alert.DefaultInterval {
				tick(i == 0)
				f.expectSent()
			}
			tick(false) // KEEP after the first false evaluation
			f.expectSent(resolved)
		})
	}
}

func slices0(s []string, want ...string) bool { return strings.Join(s, ",") == strings.Join(want, ",") }

// KEEP: a firing alert resolves only after the condition has been false
// for KEEP; a true evaluation meanwhile restarts the wait. The resolution
// is notified once.
func TestKeepHysteresisAndResolveOnce(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed > 0 KEEP: 20s NOTIFY: ops`, tb, nil)
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	id := f.only("", apollo.AlertFiring).ID
	tb.set("batch_a", failing(0, 1))
	f.eval(10 * time.Second) // false 0s
	f.eval(10 * time.Second) // false 10s
	f.only("", apollo.AlertFiring)
	tb.set("batch_a", failing(1, 2))
	f.eval(10 * time.Second) // true: the wait restarts
	tb.set("batch_a", failing(0, 2))
	f.eval(10 * time.Second) // false 0s
	f.eval(10 * time.Second) // false 10s
	f.only("", apollo.AlertFiring)
	f.expectSent()
	f.eval(10 * time.Second) // false 20s: resolved
	n := f.expectSent(resolved)[0]
	a := f.only("", apollo.AlertResolved)
	if a.ID != id || n.Alert.ID != id || !a.ResolvedAt.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("resolved %+v; want %s at +60s", a, id)
	}
	for range 5 {
		f.eval(10 * time.Second)
	}
	f.expectSent() // resolved once
	// Later, a new episode: a new ID, notified again (past the dedup window).
	f.clock.Advance(5 * time.Minute)
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	if b := f.only("", apollo.AlertFiring); b.ID == id {
		t.Fatal("the new episode kept the old ID")
	}
}

// The same alert is notified at most once per dedup window: an alert
// that flaps back within it is shown firing but not sent again.
func TestDedupWindowWithinOneEngine(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed > 0 NOTIFY: ops`, tb, nil)
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	tb.set("batch_a", failing(0, 1))
	f.eval(10 * time.Second)
	f.expectSent(resolved)
	tb.set("batch_a", failing(1, 1))
	f.eval(10 * time.Second)
	f.expectSent() // within 2m of the first firing
	f.only("", apollo.AlertFiring)
	if st := f.eng.Stats(); st.Deduped != 1 || st.Sent != 2 {
		t.Fatalf("stats %+v; want 2 sent, 1 deduped", st)
	}
}

// A firing alert nobody acknowledged is notified again every
// RepeatInterval; an ack stops that until the alert resolves, and records
// who and when.
func TestRepeatAndAck(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed > 0 NOTIFY: ops`, tb,
		func(o *alert.Options) { o.RepeatInterval = 5 * time.Minute })
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	for range 29 {
		f.eval(10 * time.Second)
	}
	f.expectSent() // +4m50s
	f.eval(10 * time.Second)
	f.expectSent(repeat) // +5m
	id := f.only("", apollo.AlertFiring).ID
	if err := f.eng.Ack(bg, "", id, "ann"); err != nil {
		t.Fatal(err)
	}
	if err := f.eng.Ack(bg, "", id, "bob"); err != nil { // again: no change
		t.Fatal(err)
	}
	for range 60 {
		f.eval(10 * time.Second)
	}
	f.expectSent() // +15m, acknowledged: no repeats
	a := f.only("", apollo.AlertFiring)
	if a.AckedBy != "ann" || !a.AckedAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("ack %q at %v; want ann at +5m", a.AckedBy, a.AckedAt.Sub(t0))
	}
	tb.set("batch_a", failing(0, 1))
	f.eval(10 * time.Second)
	f.expectSent(resolved) // an ack does not hide the end
	if err := f.eng.Ack(bg, "", id, "ann"); apollo.ErrorCode(err) != apollo.ECONFLICT {
		t.Fatalf("ack of a resolved alert: %v, want conflict", err)
	}
	if err := f.eng.Ack(bg, "", "nope", "ann"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Fatalf("ack of an unknown alert: %v, want not found", err)
	}
	if err := f.eng.Ack(bg, "other", id, "ann"); apollo.ErrorCode(err) != apollo.ECONFLICT && apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Fatalf("ack from another tenant: %v", err)
	}
}

// A silence holds notifications back, not state: the alert fires and
// shows; when the silence goes it is told; a resolution during a silence
// is not.
func TestSilenceHoldsNotificationsNotState(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed > 0 NOTIFY: ops LABELS: team=data`, tb, nil)
	s, err := f.eng.AddSilence("", alert.Silence{Labels: map[string]string{"team": "data"}, EndsAt: t0.Add(time.Hour), CreatedBy: "ann", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.only("", apollo.AlertFiring)
	f.eval(10 * time.Second)
	f.expectSent()
	if st := f.eng.Stats(); st.Silenced == 0 {
		t.Fatal("the silence was not counted")
	}
	heldAt := f.clock.Now().Add(-10 * time.Second) // the first evaluation was held back
	silencedBy := func(when string) {
		t.Helper()
		for _, a := range f.eng.Alerts("", "") {
			if !a.SilencedAt.Equal(heldAt) || a.SilenceID != s.ID {
				t.Errorf("%s: the alert says silenced at %v by %q, want %v by %s", when, a.SilencedAt, a.SilenceID, heldAt, s.ID)
			}
		}
	}
	silencedBy("while silenced")
	if err := f.eng.RemoveSilence("", s.ID); err != nil {
		t.Fatal(err)
	}
	f.eval(10 * time.Second)
	f.expectSent(firing) // held back, now told
	if _, err := f.eng.AddSilence("", alert.Silence{Rule: "r", EndsAt: f.clock.Now().Add(time.Minute), CreatedBy: "ann", Comment: "fixing"}); err != nil {
		t.Fatal(err)
	}
	tb.set("batch_a", failing(0, 1))
	f.eval(10 * time.Second)
	f.only("", apollo.AlertResolved)
	f.expectSent() // the resolution during the silence is not sent
	f.eval(2 * time.Minute)
	silencedBy("resolved, with the silences ended") // the first silence is the one kept
	if got := f.eng.Silences(""); len(got) != 0 {
		t.Fatalf("expired silences kept: %+v", got)
	}
	if err := f.eng.RemoveSilence("", s.ID); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Fatalf("removing a removed silence: %v", err)
	}
}

func TestSilenceChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ``, newTable(), nil)
	end := t0.Add(time.Hour)
	for name, tc := range map[string]struct {
		s     alert.Silence
		field string
	}{
		"no matcher":   {alert.Silence{EndsAt: end, CreatedBy: "a", Comment: "c"}, "rule"},
		"no end":       {alert.Silence{Rule: "r", CreatedBy: "a", Comment: "c"}, "endsAt"},
		"over":         {alert.Silence{Rule: "r", EndsAt: t0.Add(-time.Second), StartsAt: t0.Add(-time.Hour), CreatedBy: "a", Comment: "c"}, "endsAt"},
		"end <= start": {alert.Silence{Rule: "r", StartsAt: end, EndsAt: end, CreatedBy: "a", Comment: "c"}, "endsAt"},
		"too long":     {alert.Silence{Rule: "r", EndsAt: t0.Add(400 * 24 * time.Hour), CreatedBy: "a", Comment: "c"}, "endsAt"},
		"no comment":   {alert.Silence{Rule: "r", EndsAt: end, CreatedBy: "a", Comment: " "}, "comment"},
		"no author":    {alert.Silence{Rule: "r", EndsAt: end, Comment: "c"}, "createdBy"},
		"bad id":       {alert.Silence{ID: "a b", Rule: "r", EndsAt: end, CreatedBy: "a", Comment: "c"}, "id"},
		"empty label":  {alert.Silence{Labels: map[string]string{"": "x"}, EndsAt: end, CreatedBy: "a", Comment: "c"}, "labels"},
		"long group":   {alert.Silence{Group: strings.Repeat("g", apollo.MaxNameBytes+1), EndsAt: end, CreatedBy: "a", Comment: "c"}, "group"},
	} {
		_, err := f.eng.AddSilence("", tc.s)
		var ae *apollo.Error
		if !errors.As(err, &ae) || ae.Code != apollo.EINVALID || ae.Field != tc.field {
			t.Errorf("%s: %v, want invalid %s", name, err, tc.field)
		}
	}
	// An ID that exists replaces that silence.
	a, err := f.eng.AddSilence("", alert.Silence{ID: "s1", Prefix: "etl_", EndsAt: end, CreatedBy: "a", Comment: "c"})
	if err != nil || a.ID != "s1" || !a.StartsAt.Equal(t0) {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := f.eng.AddSilence("", alert.Silence{ID: "s1", Prefix: "batch_", EndsAt: end, CreatedBy: "a", Comment: "c"}); err != nil {
		t.Fatal(err)
	}
	if got := f.eng.Silences(""); len(got) != 1 || got[0].Prefix != "batch_" {
		t.Fatalf("silences %+v", got)
	}
	if got := f.eng.Silences("other"); len(got) != 0 {
		t.Fatalf("another tenant sees %+v", got)
	}
}

func TestSilenceMatches(t *testing.T) {
	t.Parallel()
	a := &apollo.Alert{Rule: "r", Group: "batch_nightly", Labels: map[string]string{"team": "data", "tier": "1"}}
	for _, tc := range []struct {
		s    alert.Silence
		want bool
	}{
		{alert.Silence{Rule: "r"}, true},
		{alert.Silence{Rule: "q"}, false},
		{alert.Silence{Prefix: "batch_"}, true},
		{alert.Silence{Prefix: "batch_nightly_x"}, false},
		{alert.Silence{Labels: map[string]string{"team": "data"}}, true},
		{alert.Silence{Labels: map[string]string{"team": "data", "tier": "2"}}, false},
		{alert.Silence{Labels: map[string]string{"owner": "x"}}, false},
		{alert.Silence{Rule: "r", Prefix: "etl_"}, false}, // every matcher must fit
		{alert.Silence{Group: "batch_nightly"}, true},
		{alert.Silence{Group: "batch_"}, false}, // a group is matched whole
		{alert.Silence{Rule: "r", Group: "batch_nightly", Prefix: "batch_"}, true},
	} {
		if got := tc.s.Matches(a); got != tc.want {
			t.Errorf("%+v matches: %v, want %v", tc.s, got, tc.want)
		}
	}
	s := alert.Silence{StartsAt: t0, EndsAt: t0.Add(time.Minute)}
	if s.Active(t0.Add(-time.Nanosecond)) || !s.Active(t0) || s.Active(t0.Add(time.Minute)) {
		t.Error("a silence is active in [StartsAt, EndsAt)")
	}
}

// Rules that go resolve their alerts at the next evaluation, with one
// resolution; rules that keep their name keep their alerts.
func TestSetRulesResolvesRemovedRules(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE keep task_prefix: "batch_" THRESHOLD: failed > 0 NOTIFY: ops
RULE gone task_prefix: "batch_" THRESHOLD: count > 0 NOTIFY: ops`, tb, nil)
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing, firing)
	keep := f.eng.Alerts("", apollo.AlertFiring)
	f.eng.SetRules("", parse(t, `RULE keep task_prefix: "batch_" THRESHOLD: failed > 0 SEVERITY: critical NOTIFY: ops`))
	f.eval(10 * time.Second)
	ns := f.expectSent(resolved)
	if ns[0].Alert.Rule != "gone" || !strings.HasSuffix(ns[0].Alert.Summary, "(rule removed)") {
		t.Fatalf("resolution %+v", ns[0].Alert)
	}
	if a := f.only("", apollo.AlertFiring); a.Rule != "keep" || (a.ID != keep[0].ID && a.ID != keep[1].ID) {
		t.Fatalf("kept %+v", a)
	}
	if got := f.eng.Rules(""); len(got) != 1 || got[0].Name != "keep" {
		t.Fatalf("rules %v", got)
	}
	// A new prefix is another group: the old one resolves.
	f.eng.SetRules("", parse(t, `RULE keep task_prefix: "batch_a" THRESHOLD: failed > 0 NOTIFY: ops`))
	f.eval(10 * time.Second)
	f.expectSent(firing, resolved) // the new group opens before the old one is found unreached
}

// A table that cannot be read leaves its rules' alerts as they were.
func TestStoreErrorKeepsState(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE r task_prefix: "batch_" THRESHOLD: failed > 0 NOTIFY: ops`, tb, nil)
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	tb.fail = errors.New("redis down")
	f.clock.Advance(10 * time.Second)
	if err := f.eng.Evaluate(bg, f.clock.Now()); err == nil || !strings.Contains(err.Error(), "redis down") {
		t.Fatalf("Evaluate: %v", err)
	}
	f.only("", apollo.AlertFiring)
	f.expectSent()
	if st := f.eng.Stats(); st.EvaluationErrors != 1 || st.Evaluations != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// With BY: name each job is its own group; a job that left the table
// (nothing within the metrics' retention) counts as idle, so
// "count == 0" keeps firing for it, while rates, undefined without runs,
// resolve.
func TestByNameAndVanishedJobs(t *testing.T) {
	t.Parallel()
	tb := newTable()
	f := newFixture(t, `RULE silent task_prefix: "export_" BY: name WINDOW: 10m THRESHOLD: count == 0 NOTIFY: ops
RULE broken task_prefix: "export_" BY: name WINDOW: 10m THRESHOLD: failed_rate > 50% NOTIFY: ops`, tb, nil)
	tb.set("export_a", failing(0, 3))
	tb.set("export_b", apollo.Summary{}) // ran before the window
	tb.set("export_c", failing(3, 3))
	tb.set("other", apollo.Summary{})
	f.eval(0)
	got := map[string]string{}
	for _, n := range f.expectSent(firing, firing) {
		got[n.Alert.Rule] = n.Alert.Group
	}
	if got["silent"] != "export_b" || got["broken"] != "export_c" {
		t.Fatalf("fired %v", got)
	}
	tb.remove("export_b")
	tb.remove("export_c")
	f.eval(10 * time.Second)
	ns := f.expectSent(resolved)
	if ns[0].Alert.Rule != "broken" {
		t.Fatalf("resolved %+v", ns[0].Alert)
	}
	a := f.only("", apollo.AlertFiring)
	if a.Rule != "silent" || a.Group != "export_b" || a.Summary != "count 0 == 0 for export_b over 10m" {
		t.Fatalf("still firing: %+v", a)
	}
}

// brokenLock fails every call and counts them.
type brokenLock struct{ calls int }

func (b *brokenLock) Acquire(context.Context, string, time.Duration) (bool, error) {
	b.calls++
	return false, errors.New("connection refused")
}

// A lock that cannot be asked does not lose notifications, and is not
// asked again for a while: a dead Redis must not slow every message.
func TestBrokenLockSendsAnyway(t *testing.T) {
	t.Parallel()
	tb := newTable()
	lock := &brokenLock{}
	f := newFixture(t, `RULE r task_prefix: "j" BY: name THRESHOLD: failed > 0 NOTIFY: ops`, tb, func(o *alert.Options) { o.Locker = lock })
	for i := range 5 {
		tb.set(fmt.Sprint("j", i), failing(1, 1))
	}
	f.eval(0)
	f.expectSent(firing, firing, firing, firing, firing)
	if lock.calls != 1 || f.eng.Stats().LockErrors != 5 {
		t.Fatalf("lock asked %d times, %d lock errors; want 1 and 5", lock.calls, f.eng.Stats().LockErrors)
	}
	for i := range 5 {
		tb.set(fmt.Sprint("j", i), failing(0, 1))
	}
	f.eval(time.Minute) // past the back-off: asked again
	f.expectSent(resolved, resolved, resolved, resolved, resolved)
	if lock.calls != 2 {
		t.Fatalf("lock asked %d times, want 2", lock.calls)
	}
}
