package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
)

// stormAlerts fires n alerts of tenant at once: a rule with BY: name
// over n jobs, and a failed run of each, reported in as few requests as
// the server takes.
func (d *deployment) stormAlerts(tenant string, n int) {
	d.t.Helper()
	d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_storm task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 BY: name\n", tenant, tenant+"_"), nil, 200)
	end := time.Now().UnixMilli()
	var events []map[string]any
	flush := func() {
		body, _ := json.Marshal(events)
		d.do(tenant, "POST", "/api/v1/events", string(body), nil, 200)
		events = events[:0]
	}
	for i := range n {
		id := fmt.Sprintf("%s_%05d-1", tenant, i)
		events = append(events,
			map[string]any{"taskID": id, "name": fmt.Sprintf("%s_%05d", tenant, i), "sequence": 1, "status": "running", "ts": end - 1},
			map[string]any{"taskID": id, "sequence": 2, "status": "failed", "ts": end})
		if len(events) == 5000 {
			flush()
		}
	}
	if len(events) > 0 {
		flush()
	}
}

// A storm of alerts (a BY: name rule over thousands of failing jobs,
// more changes at once than the alert engine's buffer to the stream)
// makes the engine drop the stream's subscription (in the three
// processes, the alert process's publisher's): the changes of the storm
// past the buffer never reach the stream, which tells its clients so
// (alerts_lost). Two dashboards are open on the Alerts tab, acme's and
// globex's, on a clock that never moves (no 10 s refresh, no reconnect):
// after the storm each shows what the server holds, read again on
// alerts_lost: acme 1 000 of its 3 000 (the most the tab keeps), globex
// its 600 and nothing of acme's. Without the read they show the few
// hundred the stream delivered before the drop ("firing 128"), for good;
// before TestAlertStormClosesNoClient's fix the storm closed both
// streams as too slow.
func TestTUIReadsAlertsAgainAfterAStorm(t *testing.T) {
	eachMode(t, deployOptions{repeat: "1h"}, func(t *testing.T, d *deployment, _ *hook) {
		want := map[string]int{"acme": 3000, "globex": 600}
		screens := map[string]shownTUI{}
		for _, tenant := range tenants {
			s, p := runTUI(t, d.api.addr, d.tokens[tenant], apollo.NewFakeClock(time.Now()))
			p.Send(tea.KeyPressMsg{Code: '4', Text: "4"})
			s.until(t, tenant+"'s dashboard live, with no alerts", func(text string) bool {
				return strings.Contains(text, "● live") && strings.Contains(text, "No alerts.")
			})
			screens[tenant] = s
		}
		lost := func() int {
			var sys struct {
				Stream struct{ AlertsLost, AlertsCut int }
			}
			d.do("", "GET", "/api/v1/system", "", &sys, 200)
			return sys.Stream.AlertsLost + sys.Stream.AlertsCut
		}
		before := lost()

		for _, tenant := range tenants {
			d.stormAlerts(tenant, want[tenant])
		}
		for _, tenant := range tenants {
			eventually(t, 2*time.Minute, fmt.Sprintf("%s's %d alerts firing", tenant, want[tenant]), func() bool {
				var l struct{ Total int }
				d.do(tenant, "GET", "/api/v1/alerts?state=firing&limit=1", "", &l, 200)
				return l.Total == want[tenant]
			})
		}
		// The storm overflowed the stream: what follows is the dashboards'
		// answer to alerts_lost, not to a storm the stream kept up with.
		// In the three processes the bus hears of it through Redis, after
		// the alert process lists the alerts.
		eventually(t, 30*time.Second, "the stream losing alert changes in the storm (stream.alertsLost, alertsCut)", func() bool {
			return lost() > before
		})

		screens["acme"].until(t, "acme's tab saying 1 000 of 3 000 alerts shown", func(text string) bool {
			return strings.Contains(text, "firing 1000 ·") && strings.Contains(text, "1 000 of 3 000 alerts shown") && alertRows(text, "acme_storm", "acme_") > 0
		})
		text := screens["globex"].until(t, "globex's 600 alerts", func(text string) bool {
			return strings.Contains(text, "firing 600 ·") && strings.Contains(text, "4 Alerts (600)") && alertRows(text, "globex_storm", "globex_") > 0
		})
		if strings.Contains(text, "acme") || strings.Contains(text, " shown") {
			t.Errorf("globex's tab, with all of its 600 alerts, says otherwise or shows acme's:\n%s", text)
		}
	})
}
