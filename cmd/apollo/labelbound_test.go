package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/notify/webhook"
)

// A rule's label value is held to 1 KiB (rules.MaxLabelValueBytes): PUT
// /api/v1/rules refuses a longer one, saying where and what to do. Rules an
// older release accepted and saved with a longer value still run after the
// upgrade and a kill -9: the bound applies to what is written now, not to
// what was accepted before (rules.ParseSaved).
func TestLongLabelRefusedButSavedOnesKeepRunning(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := startDeployment(t, false, h, deployOptions{})
	long := strings.Repeat("r", 2000)
	rule := func(tenant, value string) string {
		return fmt.Sprintf("RULE %s_failed task_prefix: %q ON: failed NOTIFY: hook LABELS: runbook=%q\n", tenant, tenant+"_", value)
	}
	for _, tenant := range tenants {
		var e struct{ Errors []apiclient.RuleProblem }
		d.do(tenant, "PUT", "/api/v1/rules", rule(tenant, long), &e, 400)
		if len(e.Errors) != 1 || e.Errors[0].Line != 1 || !strings.Contains(e.Errors[0].Message, "the value of runbook is 2000 bytes") ||
			!strings.Contains(e.Errors[0].Message, "at most 1024") {
			t.Errorf("tenant %s: a 2000-byte label refused with %+v; want its size, the bound and where", tenant, e.Errors)
		}
		d.do(tenant, "PUT", "/api/v1/rules", rule(tenant, "short"), nil, 200)
	}
	// What an older release saved, in its one rules.json: acme's rule
	// with the long value.
	d.api.kill()
	b, err := json.Marshal(map[string]any{"version": 1, "tenants": map[string]string{"acme": rule("acme", long), "globex": rule("globex", "short")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "data", "rules.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	want := map[string]string{"acme": long, "globex": "short"}
	got := map[string]bool{}
	for len(got) < len(tenants) {
		p := h.await(t, 30*time.Second, "each tenant's firing", func(p webhook.ApolloPayload) bool {
			return p.Kind == apollo.NotifyFiring && !got[p.Alert.Tenant]
		})
		if v := p.Alert.Labels["runbook"]; v != want[p.Alert.Tenant] {
			t.Errorf("tenant %s fired with runbook of %d bytes, want %d", p.Alert.Tenant, len(v), len(want[p.Alert.Tenant]))
		}
		got[p.Alert.Tenant] = true
	}
}
