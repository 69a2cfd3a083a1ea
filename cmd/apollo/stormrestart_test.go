package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore"
)

// storm reports n runs of tenant's jobs <tenant>_batch_0..4 that start and
// fail, in one request.
func (d *deployment) storm(tenant string, n int) {
	d.t.Helper()
	evs := make([]string, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("%s-storm-%d", tenant, d.seq.Add(1))
		start, end := d.runAt()
		evs = append(evs,
			fmt.Sprintf(`{"taskID":%q,"name":"%s_batch_%d","sequence":1,"status":"running","ts":%d}`, id, tenant, i%5, start),
			fmt.Sprintf(`{"taskID":%q,"sequence":2,"status":"failed","ts":%d}`, id, end))
	}
	d.do(tenant, "POST", "/api/v1/events", "["+strings.Join(evs, ",")+"]", nil, 200)
}

// A storm goes on across kill -9 of the process that notifies (the
// all-in-one server, or the bus and the alert process): the failures after
// the restart join the storm that was told before it, and are told once,
// in the follow-up at the end of its group window; they do not start a
// second storm with a second first message. The engine saves what changed
// every evaluation (a minute here); before, a kill in that minute lost the
// open group, and the restarted engine told the storm again as new.
func TestStormGoesOnAcrossKill(t *testing.T) {
	const window = 40 * time.Second
	eachMode(t, deployOptions{interval: "1m"}, func(t *testing.T, d *deployment, h *hook) {
		want := map[string]string{}
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %[1]s_storm task_prefix: \"%[1]s_batch_\" ON: failed GROUP_WINDOW: %s NOTIFY: hook\n",
				tenant, window), nil, 200)
			want[tenant] = tenant + "_storm"
		}
		began := time.Now()
		for _, tenant := range tenants {
			d.storm(tenant, 150)
		}
		awaitTenants(t, h, "firing", want)
		// The storms are saved just after their messages leave (a message
		// is never held back for a save): kill once both are on record.
		// Without the fix that is the next evaluation, a minute away. And
		// once their deliveries are settled in the outbox: the webhook has
		// a message a moment before its sender hears the answer, and a kill
		// in that moment sends it again after the restart (at least once).
		for saved := d.savedAlerts(); !saved["acme_storm"] || !saved["globex_storm"] || d.owedNow() > 0; saved = d.savedAlerts() {
			if time.Since(began) > window/2 {
				t.Fatalf("%v after the storms began only %v are saved and %d notifications still owed: a kill now would lose the others, or tell them again",
					time.Since(began), saved, d.owedNow())
			}
			time.Sleep(50 * time.Millisecond) // polling the saved state
		}
		d.crash()
		for _, tenant := range tenants {
			d.storm(tenant, 150)
		}
		if since := time.Since(began); since > window-5*time.Second {
			t.Fatalf("the restart took %v, too close to the group window (%v) to tell a storm that goes on from a new one", since, window)
		}
		// Fails on another first message; waits for each tenant's follow-up.
		// The killed processes are told as down (apollo:...): not the question.
		got := map[string]webhook.ApolloPayload{}
		for len(got) < len(tenants) {
			p := h.await(t, 2*window, "the storms' follow-ups", func(p webhook.ApolloPayload) bool { return !strings.HasPrefix(p.Alert.Rule, "apollo:") })
			if want[p.Alert.Tenant] != p.Alert.Rule || p.Kind != "storm" {
				t.Fatalf("a %s notification of tenant %q, rule %q after the restart: want only one follow-up of each tenant's storm\n%+v", p.Kind, p.Alert.Tenant, p.Alert.Rule, p)
			}
			got[p.Alert.Tenant] = p
		}
		for tenant, p := range got {
			if p.Alert.Count < 150 {
				t.Errorf("tenant %s: the follow-up tells %d failures, want at least the 150 after the restart", tenant, p.Alert.Count)
			}
		}
	})
}

// savedAlerts returns the rules of the alerts in the saved alert state:
// what a restarted engine would load (alerts.json, or Redis).
func (d *deployment) savedAlerts() map[string]bool {
	d.t.Helper()
	store := alert.StateStore(alert.NewFileState(filepath.Join(d.dir, "data", "alerts.json")))
	if d.three {
		c, err := redisstore.Open(redisURL(d.t))
		if err != nil {
			d.t.Fatal(err)
		}
		defer c.Close()
		store = redisstore.NewAlertState(c, d.prefix, nil)
	}
	st, err := store.Load(d.t.Context())
	if err != nil {
		d.t.Fatalf("loading the saved alert state: %v", err)
	}
	rules := map[string]bool{}
	for _, a := range st.Alerts {
		rules[a.Rule] = true
	}
	return rules
}
