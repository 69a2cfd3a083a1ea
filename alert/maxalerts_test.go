package alert_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// A tenant's open alerts stop at MaxAlerts; the others are counted, told
// as a self-alert of the default tenant, and opened once an open one
// resolves. The other tenant, with a rule of the same name over the same
// jobs, has a bound of its own.
func TestMaxAlertsBoundsOneTenant(t *testing.T) {
	tab := newTable()
	for _, j := range []string{"job_0", "job_1", "job_2", "job_3", "job_4"} {
		tab.set(j, failing(1, 1))
	}
	f := newFixture(t, "", tab, func(o *alert.Options) {
		o.MaxAlerts = 3
		o.SelfChannels = []string{"ops"}
	})
	f.eng.SetRules("acme", parse(t, `RULE r task_prefix: "job_" WINDOW: 1m THRESHOLD: failed >= 1 BY: name NOTIFY: ops`))
	f.eng.SetRules("globex", parse(t, `RULE r task_prefix: "job_4" WINDOW: 1m THRESHOLD: failed >= 1 BY: name NOTIFY: ops`))
	f.eval(10 * time.Second)

	if n := len(f.eng.Alerts("acme", apollo.AlertFiring)); n != 3 {
		t.Fatalf("acme has %d firing alerts, want the bound, 3", n)
	}
	if g := f.only("globex", apollo.AlertFiring); g.Group != "job_4" {
		t.Fatalf("globex's alert %+v, want job_4's", g)
	}
	if got := f.eng.Stats().Refused; got != 2 {
		t.Fatalf("Stats.Refused %d, want acme's 2", got)
	}
	self := f.only("", apollo.AlertFiring)
	if !strings.Contains(self.Summary, `tenant "acme"`) || strings.Contains(self.Summary, "globex") {
		t.Fatalf("the self-alert says %q, want acme named and globex not", self.Summary)
	}

	// job_0 recovers: its alert resolves, and the next cycle opens one
	// that was kept out.
	tab.set("job_0", failing(0, 1))
	f.eval(10 * time.Second)
	f.eval(10 * time.Second)
	var groups []string
	for _, a := range f.eng.Alerts("acme", apollo.AlertFiring) {
		groups = append(groups, a.Group)
	}
	if len(groups) != 3 || strings.Contains(strings.Join(groups, ","), "job_0") {
		t.Fatalf("acme's firing alerts after job_0 recovered: %v, want 3 of job_1 to job_4", groups)
	}
}
