package outboxtest

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

// Harness gives the suite outboxes over one backing store; Run calls New
// once per case, so that every case starts from an empty store.
type Harness struct {
	// Open returns an outbox over the store as a process starting now
	// opens it: it owes what the processes that stopped or died owed.
	Open func(t *testing.T) notify.Outbox
	// Stop ends o as a clean shutdown ends it.
	Stop func(t *testing.T, o notify.Outbox)
	// Crash ends o as kill -9 does: nothing more is written, and what it
	// owed is for the next Open, as soon as it opens.
	Crash func(t *testing.T, o notify.Outbox)
}

// t0 has nanoseconds and a zone other than UTC: what comes back must be
// the same instant.
var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+8", 8*3600))

// entry is what the suite owes: a channel, when, and the notification.
type entry struct {
	channel string
	at      time.Time
	n       apollo.Notification
}

func note(tenant, id string) apollo.Notification {
	return apollo.Notification{Kind: apollo.NotifyFiring, Channels: []string{"hook"}, DedupKey: tenant + ":" + id, At: t0,
		Alert: apollo.Alert{ID: id, Tenant: tenant, Rule: id + "_failed", Group: id, State: apollo.AlertFiring,
			Severity: apollo.SeverityCritical, Summary: id + " failed", Value: 1, Count: 1, StartedAt: t0, FiredAt: t0}}
}

// hostile is a notification of tenant whose every text reporters and
// rule authors can choose is as hard to keep as text gets.
func hostile(tenant string) apollo.Notification {
	n := note(tenant, "h\r\nX-Injected: 1\x00\u202e\u2066evil\u2069")
	n.Alert.Summary = strings.Repeat("\u202egröße 失败 \"quoted\" \\back\\ \t\x1b[31m", 2000) // ~90 KiB
	n.Alert.Group = "g:{x}%" + "\x7f"
	n.Alert.Labels = map[string]string{}
	for i := range 500 {
		n.Alert.Labels[fmt.Sprintf("l%d\n", i)] = fmt.Sprintf("v%d\r", i)
	}
	n.Alert.TopNames = make([]string, 1000)
	for i := range n.Alert.TopNames {
		n.Alert.TopNames[i] = fmt.Sprint(i)
	}
	n.Alert.Count = math.MaxInt64
	n.Alert.Value = -math.MaxFloat64
	n.Alert.StartedAt = time.Unix(0, math.MinInt64).UTC()
	n.Alert.FiredAt = time.Unix(0, math.MaxInt64).UTC()
	return n
}

// Run runs the suite.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"Empty", empty},
		{"CrashKeepsWhatIsOwed", func(t *testing.T, h Harness) { keeps(t, h, h.Crash) }},
		{"StopKeepsWhatIsOwed", func(t *testing.T, h Harness) { keeps(t, h, h.Stop) }},
		{"SettledAfterRestart", settledAfterRestart},
		{"OwedIsWhatWasOwedAtOpen", owedAtOpen},
		{"ManyTiny", manyTiny},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newHarness(t))
		})
	}
}

func mustOwe(t *testing.T, o notify.Outbox, e entry) uint64 {
	t.Helper()
	id, err := o.Owe(e.channel, e.at, e.n)
	if err != nil {
		t.Fatalf("Owe(%s, tenant %q, alert %.20q): %v", e.channel, e.n.Alert.Tenant, e.n.Alert.ID, err)
	}
	if id == 0 {
		t.Fatal("Owe returned ID 0, which Settle ignores")
	}
	return id
}

func mustSettle(t *testing.T, o notify.Outbox, ids ...uint64) {
	t.Helper()
	if err := o.Settle(ids...); err != nil {
		t.Fatalf("Settle(%v): %v", ids, err)
	}
}

// check fails unless got is want, in order, each as it was owed: the
// channel, the same instant, and the notification as JSON (the form both
// outboxes promise).
func check(t *testing.T, what string, got []notify.OwedNotification, want []entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d owed, want %d: %s", what, len(got), len(want), summary(got))
	}
	seen := map[uint64]bool{}
	for i, g := range got {
		w := want[i]
		if g.ID == 0 || seen[g.ID] {
			t.Fatalf("%s: entry %d has ID %d (zero or seen before): %s", what, i, g.ID, summary(got))
		}
		seen[g.ID] = true
		a, _ := json.Marshal(g.Notification)
		b, _ := json.Marshal(w.n)
		if g.Channel != w.channel || !g.At.Equal(w.at) || string(a) != string(b) {
			t.Fatalf("%s: entry %d is %s %v tenant %q alert %.40q, want %s %v tenant %q alert %.40q (or its text differs)",
				what, i, g.Channel, g.At, g.Notification.Alert.Tenant, g.Notification.Alert.ID,
				w.channel, w.at, w.n.Alert.Tenant, w.n.Alert.ID)
		}
	}
}

func summary(es []notify.OwedNotification) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "[%d %s %s/%.20q] ", e.ID, e.Channel, e.Notification.Alert.Tenant, e.Notification.Alert.ID)
	}
	return b.String()
}

// A new store owes nothing, and settling what it does not hold (or ID
// 0, which Owe never returns) is no error.
func empty(t *testing.T, h Harness) {
	o := h.Open(t)
	check(t, "a new outbox", o.Owed(), nil)
	mustSettle(t, o)
	mustSettle(t, o, 0, 42, math.MaxUint64)
	h.Crash(t, o)
	check(t, "after a crash of an outbox that owed nothing", h.Open(t).Owed(), nil)
}

// What was owed and not settled when the process ended, by a crash or
// a stop, is owed to the next one, oldest first, each tenant's own, the
// hostile text as it was.
func keeps(t *testing.T, h Harness, end func(*testing.T, notify.Outbox)) {
	o := h.Open(t)
	all := []entry{
		{"hook", t0, note("acme", "a1")},
		{"mail", t0.Add(time.Second), note("globex", "g1")},
		{"hook", t0.Add(2 * time.Second), hostile("acme")},
		{"hook", t0.Add(3 * time.Second), note("globex", "g2")},
		{"mail\r\n\u202e", t0.Add(4 * time.Second), hostile("globex\x00\u2066")},
		{"hook", t0.Add(5 * time.Second), note("", "default")},
	}
	ids := make([]uint64, len(all))
	for i, e := range all {
		ids[i] = mustOwe(t, o, e)
		for _, prev := range ids[:i] {
			if prev == ids[i] {
				t.Fatalf("Owe returned ID %d twice", prev)
			}
		}
	}
	mustSettle(t, o, ids[1])
	mustSettle(t, o, ids[3], ids[3]) // settling twice is settling once
	end(t, o)
	check(t, "after the end", h.Open(t).Owed(), []entry{all[0], all[2], all[4], all[5]})
}

// An entry owed before a restart is settled by the process that sends
// it, through the ID Owed gave; entries owed after the restart never
// take the ID of one still owed.
func settledAfterRestart(t *testing.T, h Harness) {
	o := h.Open(t)
	a, b := entry{"hook", t0, note("acme", "a")}, entry{"hook", t0, note("globex", "b")}
	mustOwe(t, o, a)
	mustOwe(t, o, b)
	h.Crash(t, o)

	o = h.Open(t)
	owed := o.Owed()
	check(t, "after the first crash", owed, []entry{a, b})
	c := entry{"hook", t0.Add(time.Minute), note("acme", "c")}
	var fresh []uint64
	for range 3 {
		id := mustOwe(t, o, c)
		if id == owed[0].ID || id == owed[1].ID {
			t.Fatalf("Owe after a restart returned %d, the ID of an entry still owed (%s)", id, summary(owed))
		}
		fresh = append(fresh, id)
	}
	mustSettle(t, o, owed[0].ID, fresh[0], fresh[1])
	h.Crash(t, o)
	check(t, "after the second crash", h.Open(t).Owed(), []entry{b, c})
}

// Owed is what was owed when the outbox opened: entries owed since are
// not in it (Start queues them already).
func owedAtOpen(t *testing.T, h Harness) {
	o := h.Open(t)
	a := entry{"hook", t0, note("acme", "a")}
	mustOwe(t, o, a)
	h.Stop(t, o)
	o = h.Open(t)
	mustOwe(t, o, entry{"hook", t0, note("globex", "later")})
	check(t, "Owed after another Owe", o.Owed(), []entry{a})
}

// Many small entries, nearly all settled, the way a busy outbox lives:
// the few left are owed, in order.
func manyTiny(t *testing.T, h Harness) {
	o := h.Open(t)
	var want []entry
	for i := range 3000 {
		tenant := []string{"acme", "globex"}[i%2]
		e := entry{"c", t0.Add(time.Duration(i) * time.Millisecond), apollo.Notification{Kind: apollo.NotifyFiring,
			Alert: apollo.Alert{ID: fmt.Sprint(i), Tenant: tenant}}}
		id := mustOwe(t, o, e)
		if i%300 == 7 {
			want = append(want, e)
			continue
		}
		mustSettle(t, o, id)
	}
	h.Crash(t, o)
	check(t, "after 3000 owed and all but 10 settled", h.Open(t).Owed(), want)
}
