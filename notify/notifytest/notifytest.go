package notifytest

import (
	"context"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

// Parts of the hostile notification a test looks for.
const (
	// HostileJob is a job name that reads like an order from a colleague,
	// with a link.
	HostileJob = "URGENT from SRE lead: rotate prod keys now at http://evil.example/rotate"
	// Readable is a part of HostileJob that must still be shown.
	Readable = "rotate prod keys now at"
	// RunbookURL is a label value a rule author chose; it keeps its link.
	RunbookURL = "https://wiki.example.com/runbook"
)

// hostileRun is a run ID that tries every channel's link and mention
// syntax, and a line of its own.
const hostileRun = "[click here](http://evil.example/x) <!channel> <!here> @all @13800000000 " +
	`<at user_id="all">所有人</at> <@zhangsan> <a href="http://evil.example/a">docs</a> ` +
	"![img](http://evil.example/i.png) <http://evil.example/auto>\n### FAKE heading\x1b[31m"

// Forbidden are the strings no channel may deliver from hostile text:
// link and image syntax, mentions, tags, a clickable URL of the attacker,
// an injected heading line and a terminal escape.
var Forbidden = []string{"http://evil", "https://evil", "](", "<!channel>", "<!here>", "@all", "@138",
	"<at", "<@", "<a ", "<http", "### FAKE", "\x1b"}

// Hostile is a firing notification of tenant to channel whose group, top
// job, summary and labels carry hostile text from a reporter.
func Hostile(tenant, channel string) apollo.Notification {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	return apollo.Notification{Kind: apollo.NotifyFiring, Channels: []string{channel}, DedupKey: "hostile", At: at,
		Alert: apollo.Alert{ID: "a-hostile", Tenant: tenant, Rule: "job_failed", Group: HostileJob, State: apollo.AlertFiring,
			Severity: apollo.SeverityCritical, Summary: HostileJob + " failed (run " + hostileRun + ")",
			// A rule author's label keeps a visible URL (the runbook), but
			// no link syntax or mention.
			Labels:   map[string]string{"runbook": RunbookURL, "note": "[x](/l) @all <!channel>"},
			TopNames: []string{HostileJob}, Count: 1, Value: 1, StartedAt: at, FiredAt: at, Channels: []string{channel}}}
}

// watch is an AttemptLog that hands every Attempt to the test.
type watch struct {
	notify.AttemptLog
	c chan notify.Attempt
}

func (w *watch) Record(a notify.Attempt) { w.AttemptLog.Record(a); w.c <- a }

// Deliver sends each notification, in turn, through a dispatcher with ch
// alone and tenants in use, and waits for it to be sent; anything else
// fails the test. The channel's rate limit is lifted, so that no message
// waits or folds into a digest.
func Deliver(t testing.TB, ch notify.Channel, ns ...apollo.Notification) {
	t.Helper()
	ch.RatePerMinute = 0
	log := &watch{AttemptLog: notify.NewMemoryLog(100), c: make(chan notify.Attempt, 100)}
	d, err := notify.NewDispatcher([]notify.Channel{ch}, notify.Options{Log: log, Location: time.UTC, Tenants: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	for _, n := range ns {
		d.Send(n)
		select {
		case a := <-log.c:
			if a.Outcome != notify.OutcomeSent {
				t.Fatalf("%s: %s: %s", ch.Name, a.Outcome, a.Error)
			}
		case <-time.After(10 * time.Second): // real time: a safety net
			t.Fatalf("%s: no outcome within 10s", ch.Name)
		}
	}
}

// CheckInert fails the test unless what people read of a message (its
// visible strings, joined) shows tenant and the hostile job's words, keeps
// the runbook's link, and holds nothing Forbidden.
func CheckInert(t testing.TB, tenant string, visible ...string) {
	t.Helper()
	s := strings.Join(visible, "\n")
	for _, want := range []string{tenant, Readable, RunbookURL} {
		if !strings.Contains(s, want) {
			t.Errorf("%q missing from the message:\n%s", want, s)
		}
	}
	for _, bad := range Forbidden {
		if strings.Contains(s, bad) {
			t.Errorf("%q in the message:\n%s", bad, s)
		}
	}
}
