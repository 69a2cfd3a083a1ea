package alert_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A restart with a firing alert does not notify it again: the "notified"
// marks, acks and silences come back from the file; the resolution later
// is still told, once. The new engine has a fresh lock, as a restarted
// process would, so it is the marks that prevent the duplicate.
func TestRestartDoesNotNotifyAgain(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "alerts.json")
	tb := newTable()
	src := `RULE r task_prefix: "batch_" THRESHOLD: failed > 0 NOTIFY: ops
RULE ev task_prefix: "etl_" ON: failed NOTIFY: ops`
	file := func(o *alert.Options) { o.State = alert.NewFileState(path) }
	f := newFixture(t, src, tb, file)
	if err := f.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	tb.set("batch_a", failing(1, 1))
	f.eval(0)
	f.expectSent(firing)
	c := finish(nil, "", "etl_a", "e1", apollo.StatusFailed, f.clock.Now().UnixMilli(), 1)
	f.eng.Apply(&c)
	f.sink.Wait(t, testwait.Timeout(t))
	rate := f.eng.Alerts("", apollo.AlertFiring)
	var rateID string
	for _, a := range rate {
		if a.Rule == "r" {
			rateID = a.ID
		}
	}
	if err := f.eng.Ack(bg, "", rateID, "ann"); err != nil {
		t.Fatal(err)
	}
	sil, err := f.eng.AddSilence("", alert.Silence{Prefix: "nightly_", EndsAt: t0.Add(time.Hour), CreatedBy: "ann", Comment: "migration"})
	if err != nil {
		t.Fatal(err)
	}
	f.eng.Stop(context.Background())
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `"firingSent":true`) {
		t.Fatalf("state file: %v\n%s", err, b)
	}

	g := newFixture(t, src, tb, file)
	g.clock.Set(f.clock.Now())
	if err := g.eng.Start(bg); err != nil {
		t.Fatal(err)
	}
	g.eval(10 * time.Second)
	g.expectSent() // still firing, already told
	as := g.eng.Alerts("", apollo.AlertFiring)
	if len(as) != 2 {
		t.Fatalf("after the restart: %+v", as)
	}
	for _, a := range as {
		if a.Rule == "r" && (a.ID != rateID || a.AckedBy != "ann") {
			t.Fatalf("the rate alert came back as %+v", a)
		}
	}
	if s := g.eng.Silences(""); len(s) != 1 || s[0].ID != sil.ID {
		t.Fatalf("silences after the restart %+v", s)
	}
	// The event group closes at the end of its window: one match, no
	// follow-up. The rate alert resolves: told once.
	if !g.clock.BlockUntil(2, testwait.Timeout(t)) {
		t.Fatal("the restored group's timer was not armed")
	}
	changes, cancel := g.eng.Subscribe()
	defer cancel()
	tb.set("batch_a", failing(0, 1))
	g.eval(time.Minute)
	for closed := false; !closed; { // the group timer closes the event group
		select {
		case a := <-changes:
			closed = a.Rule == "ev" && a.State == apollo.AlertResolved
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("the restored event group did not close")
		}
	}
	g.eng.Stop(context.Background())
	if got := kinds(g.sink.Notes()); len(got) != 1 || got[0] != resolved {
		t.Fatalf("after the restart sent %v, want [resolved]", got)
	}
	if len(g.eng.Alerts("", apollo.AlertResolved)) != 2 {
		t.Fatalf("resolved %+v", g.eng.Alerts("", ""))
	}
}

func TestFileStateRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage":   `{"version":1,"alerts":[`,
		"version":   `{"version":2,"alerts":[],"silences":[]}`,
		"unknown":   `{"version":1,"alerts":[],"silences":[],"extra":1}`,
		"bad id":    `{"version":1,"alerts":[{"id":"a b","state":"firing"}],"silences":[]}`,
		"bad state": `{"version":1,"alerts":[{"id":"a","state":"inactive"}],"silences":[]}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := alert.NewFileState(p).Load(bg); err == nil || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// And an engine does not start on it.
	e, _ := alert.New(alert.Options{Store: newTable(), Sender: alerttestSink(), State: alert.NewFileState(filepath.Join(dir, "garbage")), Logger: quiet})
	if err := e.Start(bg); err == nil {
		e.Stop(context.Background())
		t.Fatal("started on a corrupt state file")
	}
}
