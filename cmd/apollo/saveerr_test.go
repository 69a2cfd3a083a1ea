package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A rules file that can no longer be written for a reason that is not the
// owner's say (its directory is gone) is a failure of the server: the PUT
// of the default tenant's rules is answered as every mode answers a write
// it could not save, 503 with nothing changed, and the cause, with its
// path, is in the log of the process that failed, not in the answer.
// Before, the alert process of the three-process mode sent the error text
// back through the bus: 500 with the alert process's file path in the body.
// Other tenants' rules, saved elsewhere, are still taken.
func TestUnsavedRulesFileSaysNoPath(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "rules")
	path := filepath.Join(dir, "rules.txt")
	const first = "RULE first task_prefix: \"x_\" ON: failed NOTIFY: hook\n"
	lay := func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lay()
	eachMode(t, deployOptions{config: "rules: " + path + "\n"}, func(t *testing.T, d *deployment, h *hook) {
		t.Cleanup(lay) // the next mode starts with the file
		if got := d.rulesOf(""); got != first {
			t.Fatalf("default tenant's rules %q, want the file's %q", got, first)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		var body struct{ Error map[string]any }
		d.do("", "PUT", "/api/v1/rules", "RULE second task_prefix: \"x_\" ON: failed NOTIFY: hook\n", &body, http.StatusServiceUnavailable)
		b, _ := json.Marshal(body)
		if strings.Contains(string(b), base) || body.Error["code"] != "unavailable" || body.Error["message"] != "the rules could not be saved, so they were not changed" {
			t.Errorf("the answer is %s; want unavailable, nothing changed, and no path of the server's", b)
		}
		if got := d.rulesOf(""); got != first {
			t.Errorf("after a PUT that could not be saved the rules are %q, want %q", got, first)
		}
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", "RULE "+tenant+"_failed task_prefix: \""+tenant+"_\" ON: failed NOTIFY: hook\n", nil, 200)
		}
		d.fail("acme", "acme_job")
		d.fail("globex", "globex_job")
		awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
		failed := d.api
		if d.alert != nil {
			failed = d.alert
		}
		failed.kill()
		said := false
		for line := range strings.Lines(failed.out.String()) {
			said = said || strings.Contains(line, "could not be saved") && strings.Contains(line, dir)
		}
		if !said {
			t.Errorf("the log of %v has no line that the rules could not be saved and why (%s):\n%s", failed.cmd.Args[1:], dir, failed.out)
		}
	})
}
