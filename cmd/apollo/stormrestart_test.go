package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/notify/webhook"
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
				t.Fatalf("a %s notification of tenant %q, rule %q after the restart: want only one follow-up of each tenant's storm", p.Kind, p.Alert.Tenant, p.Alert.Rule)
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
