package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

// The server lists at most 10 000 alerts (firing first) and answers how
// many there are; the dashboard keeps at most 1 000. Tenant acme has
// 10 050 alerts firing and globex 2: acme's Alerts tab says that it shows
// 1 000 of 10 050, globex's shows its 2 and says nothing of the kind.
// Before, the tab showed the first 1 000 as if they were all there were.
func TestTUISaysHowManyAlertsItShows(t *testing.T) {
	endToEnd(t)
	d := startDeployment(t, false, newHook(t), deployOptions{repeat: "1h"})
	const many = 10_050
	want := map[string]int{"acme": many, "globex": 2}
	end := time.Now().UnixMilli()
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_each task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 BY: name\n", tenant, tenant+"_"), nil, 200)
		var events []map[string]any
		flush := func() {
			body, _ := json.Marshal(events)
			d.do(tenant, "POST", "/api/v1/events", string(body), nil, 200)
			events = events[:0]
		}
		for i := range want[tenant] {
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
	for _, tenant := range tenants {
		eventually(t, 2*time.Minute, fmt.Sprintf("%s's %d alerts firing", tenant, want[tenant]), func() bool {
			var l struct{ Total int }
			d.do(tenant, "GET", "/api/v1/alerts?state=firing&limit=1", "", &l, 200)
			return l.Total == want[tenant]
		})
	}

	s, p := runTUI(t, d.api.addr, d.tokens["acme"], nil)
	p.Send(tea.KeyPressMsg{Code: '4', Text: "4"})
	s.until(t, "acme's tab saying 1 000 of 10 050 alerts shown", func(text string) bool {
		return strings.Contains(text, "1 000 of 10 050 alerts shown") && alertRows(text, "acme_each", "acme_") > 0
	})

	s, p = runTUI(t, d.api.addr, d.tokens["globex"], nil)
	p.Send(tea.KeyPressMsg{Code: '4', Text: "4"})
	text := s.until(t, "globex's two alerts", func(text string) bool {
		return alertRows(text, "globex_each", "globex_0000") == 2
	})
	if strings.Contains(text, " shown") || strings.Contains(text, "acme") {
		t.Errorf("globex's tab, with all of its 2 alerts, says otherwise or shows acme's:\n%s", text)
	}
}
