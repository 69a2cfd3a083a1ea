package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/alert"
)

// One tenant's rules may open no more than alert.DefaultMaxAlerts alerts:
// before, a tenant admin's PUT of a few thousand BY: name rules over the
// jobs that had failed opened one alert per rule and job (20 000 rules
// and 2 000 failed jobs grew the server past 2 GB within a minute, and
// its evaluation never finished). Now the alerts past the bound are not
// opened, and counted, and the other tenant's alert of a rule with the
// same name is still told.
func TestOneTenantsAlertsAreBounded(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := startDeployment(t, false, h, deployOptions{repeat: "1h"})
	const jobs = 1000
	rules := alert.DefaultMaxAlerts/jobs + 1 // one rule's alerts past the bound
	var src strings.Builder
	for i := range rules {
		fmt.Fprintf(&src, "RULE r%d task_prefix: \"load_\" WINDOW: 1h THRESHOLD: failed >= 1 BY: name\n", i)
	}
	d.do("acme", "PUT", "/api/v1/rules", src.String(), nil, 200)
	d.do("globex", "PUT", "/api/v1/rules", "RULE r0 task_prefix: \"load_\" WINDOW: 1h THRESHOLD: failed >= 1 BY: name NOTIFY: hook\n", nil, 200)

	var events []map[string]any
	for i := range jobs {
		start, end := d.runAt()
		id := fmt.Sprintf("load_%04d-%d", i, d.seq.Add(1))
		events = append(events,
			map[string]any{"taskID": id, "name": fmt.Sprintf("load_%04d", i), "sequence": 1, "status": "running", "ts": start},
			map[string]any{"taskID": id, "sequence": 2, "status": "failed", "ts": end})
	}
	body, _ := json.Marshal(events)
	d.do("acme", "POST", "/api/v1/events", string(body), nil, 200)

	type system struct {
		Alert struct {
			Evaluations int64
			Refused     int64
			Alerts      map[string]int
		}
	}
	var sys system
	eventually(t, 2*time.Minute, "acme's alerts past the bound refused", func() bool {
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Alert.Refused > 0 || sys.Alert.Alerts["firing"] > alert.DefaultMaxAlerts
	})
	// The bound's own self-alert, in the default tenant, is one of them.
	if open := sys.Alert.Alerts["firing"] + sys.Alert.Alerts["pending"]; open > alert.DefaultMaxAlerts+1 {
		t.Fatalf("%d alerts open, over the bound of %d for acme's %d rules over %d failed jobs", open, alert.DefaultMaxAlerts, rules, jobs)
	}
	var self struct {
		Alerts []struct{ Rule, Summary string }
	}
	d.do("", "GET", "/api/v1/alerts?state=firing", "", &self, 200)
	if len(self.Alerts) != 1 || self.Alerts[0].Rule != "apollo:apollo_alerts_over_limit" || !strings.Contains(self.Alerts[0].Summary, `tenant "acme"`) {
		t.Errorf("the default tenant's firing alerts %+v, want the self-alert of the bound, naming tenant acme", self.Alerts)
	}
	d.fail("globex", "load_x")
	awaitTenants(t, h, "firing", map[string]string{"globex": "r0"})
}
