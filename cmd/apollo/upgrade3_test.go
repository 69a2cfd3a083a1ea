package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify/webhook"
)

// startAlertWith starts the deployment's alert process with bin, the
// previous release's, or this test binary's when bin is "".
func (d *deployment) startAlertWith(bin string) {
	d.t.Helper()
	args := []string{"alert", "--config", filepath.Join(d.dir, "apollo.yaml")}
	if bin == "" {
		d.alert = startProc(d.t, "apollo alert ", args...)
		return
	}
	d.alert = startCmd(d.t, exec.Command(bin, args...), "apollo alert ")
}

// The three processes upgrade one at a time from the previous release,
// in the order docs/deploy.md prescribes (the alert process, then the
// bus) and in the opposite one, over Redis: each tenant's rate alert,
// firing and acknowledged before, stays firing and acknowledged, is
// neither told again nor resolved, and the upgraded processes evaluate:
// a new rule of each tenant fires, told once.
func TestUpgradeThreeProcesses(t *testing.T) {
	old := previousBinary(t)
	t.Parallel()
	for _, order := range []string{"AlertFirst", "BusFirst"} {
		t.Run(order, func(t *testing.T) {
			h := newHook(t)
			d := newDeployment(t, true, h, deployOptions{})
			t.Cleanup(func() { d.logOnFailure() })
			d.startWith(old)
			d.startAlertWith(old)

			for _, tenant := range tenants {
				d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(
					"RULE %[1]s_rate task_prefix: \"%[1]s_\" WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n"+
						"RULE %[1]s_after task_prefix: \"after_\" WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n", tenant), nil, 200)
				d.fail(tenant, tenant+"_load")
			}
			awaitTenants(t, h, "firing", map[string]string{"acme": "acme_rate", "globex": "globex_rate"})
			for _, tenant := range tenants {
				a := d.firingAlert(tenant, tenant+"_rate")
				d.do(tenant, "POST", "/api/v1/alerts/"+a.ID+"/ack", "", nil, 200)
			}

			alertStep := func() { d.alert.term(t); d.startAlertWith("") }
			busStep := func() { d.api.term(t); d.startWith("") }
			steps := []func(){alertStep, busStep}
			if order == "BusFirst" {
				steps = []func(){busStep, alertStep}
			}
			for i, step := range steps {
				step()
				// A rule that fires at an evaluation after the step: the
				// acknowledged alerts went through that evaluation too.
				job := fmt.Sprintf("after_%d", i)
				for _, tenant := range tenants {
					d.fail(tenant, job)
				}
				if i == 0 {
					awaitOnly(t, h, fmt.Sprintf("%s, step %d", order, i+1), map[string]string{"acme": "acme_after", "globex": "globex_after"})
				}
			}
			for _, tenant := range tenants {
				if a := d.firingAlert(tenant, tenant+"_rate"); a.AckedBy == "" {
					t.Errorf("%s: %s's alert after the upgrade %+v, want acknowledged", order, tenant, a)
				}
			}
			// A last rule put now fires: the upgraded pair evaluates.
			for _, tenant := range tenants {
				d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(
					"RULE %[1]s_rate task_prefix: \"%[1]s_\" WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n"+
						"RULE %[1]s_after task_prefix: \"after_\" WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n"+
						"RULE %[1]s_last task_prefix: \"last_\" WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n", tenant), nil, 200)
				d.fail(tenant, "last_1")
			}
			awaitOnly(t, h, order+", upgraded", map[string]string{"acme": "acme_last", "globex": "globex_last"})
		})
	}
}

// awaitOnly waits for a firing notification of each want[tenant] rule and
// fails on any other notification: a resolution, or an alert told again,
// but for the reminders of the <tenant>_after alerts, which nobody
// acknowledged (repeat: 2s), and the self-alerts of the process a step
// stopped.
func awaitOnly(t *testing.T, h *hook, when string, want map[string]string) {
	t.Helper()
	got := map[string]bool{}
	for len(got) < len(want) {
		p := h.await(t, 30*time.Second, when, func(webhook.ApolloPayload) bool { return true })
		if p.Kind == "repeat" && p.Alert.Rule == p.Alert.Tenant+"_after" {
			continue
		}
		if p.Kind == apollo.NotifySelf && (p.Alert.Rule == "apollo:"+componentDown("bus") || p.Alert.Rule == "apollo:"+componentDown("alert")) {
			// The step stopped the only process of its kind: when its
			// successor takes longer than a heartbeat (1s) to start, as
			// on a loaded machine, that is told, truly. Not a tenant's.
			continue
		}
		if want[p.Alert.Tenant] != p.Alert.Rule || p.Kind != "firing" {
			t.Errorf("%s: %s of %s's %s; want only the firing of %v", when, p.Kind, p.Alert.Tenant, p.Alert.Rule, want)
			continue
		}
		got[p.Alert.Tenant] = true
	}
}
