package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
)

// stormEach reports one failed run of each of n jobs <tenant>_job_000..,
// in one request, for a BY: name rule that tells each job on its own.
func (d *deployment) stormEach(tenant string, n int) {
	d.t.Helper()
	evs := make([]string, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("%s_job_%03d-%d", tenant, i, d.seq.Add(1))
		start, end := d.runAt()
		evs = append(evs,
			fmt.Sprintf(`{"taskID":%q,"name":"%s_job_%03d","sequence":1,"status":"running","ts":%d}`, id, tenant, i, start),
			fmt.Sprintf(`{"taskID":%q,"sequence":2,"status":"failed","ts":%d}`, id, end))
	}
	d.do(tenant, "POST", "/api/v1/events", "["+strings.Join(evs, ",")+"]", nil, 200)
}

// A webhook under a rate limit folds what arrives while it waits for its
// turn, and its receiver (an incident tool, a ticket system) still learns
// of every notification: two tenants' storms of 150 jobs each reach a
// webhook allowed 60 requests a minute, and every one of the 300 arrives,
// listed in some request, none twice. Before, the digest that waited for
// the turn held all 299 and listed the first 100: the other 199 were told
// to nobody, though the delivery record said sent.
func TestRateLimitedWebhookLosesNoNotification(t *testing.T) {
	const jobs = 150
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{hook: "    rate_per_minute: 60\n", repeat: "1h"})
	d.start()
	t.Cleanup(d.logOnFailure)
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_each task_prefix: "%[1]s_job" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: hook`+"\n", tenant), nil, 200)
	}
	for _, tenant := range tenants {
		d.stormEach(tenant, jobs)
	}
	got, requests := map[string]int{}, 0
	deadline := time.After(time.Minute + testwait.Timeout(t))
	for len(got) < len(tenants)*jobs {
		select {
		case p := <-h.C:
			requests++
			ns := append(p.Notifications, p.Notification)
			if len(p.Notifications) > 0 {
				ns = p.Notifications // a digest stands for what it lists
				if p.Omitted != 0 || p.Total != len(p.Notifications) {
					t.Errorf("a digest of %d lists %d and omits %d: a webhook must carry each", p.Total, len(p.Notifications), p.Omitted)
				}
			}
			for _, n := range ns {
				if strings.HasPrefix(n.Alert.Rule, "apollo:") {
					continue
				}
				key := n.Alert.Tenant + "/" + n.Alert.Group
				if got[key]++; got[key] > 1 {
					t.Errorf("%s told twice", key)
				}
			}
		case <-deadline:
			t.Fatalf("the webhook got %d of the %d notifications in %d requests: the rest were lost", len(got), len(tenants)*jobs, requests)
		}
	}
	for _, tenant := range tenants {
		for i := range jobs {
			if key := fmt.Sprintf("%s/%s_job_%03d", tenant, tenant, i); got[key] != 1 {
				t.Errorf("%s told %d times", key, got[key])
			}
		}
	}
}
