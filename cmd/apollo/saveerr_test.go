package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/redisstore"
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

// expectationsOf is the expectations text tenant's GET
// /api/v1/expectations answers.
func (d *deployment) expectationsOf(tenant string) string {
	d.t.Helper()
	var got struct{ Source string }
	d.do(tenant, "GET", "/api/v1/expectations", "", &got, 200)
	return got.Source
}

// An expectations file the server may not write (a read-only mount, a
// ConfigMap) refuses a PUT of the default tenant's expectations with 409
// and a message naming the file, as the rules file does, in both modes:
// the expectations belong to whoever provides the file. Before, it was
// answered 503 "could not be saved", as if the server had failed and a
// retry could help. Other tenants' PUTs, saved elsewhere, go on, and
// after kill -9 every tenant has what it was answered.
func TestReadOnlyExpectationsFileIsAConflict(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "expectations.yaml")
	const first = "expectations:\n  - job: nightly\n    every: 1h\n"
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	if !readOnly(t, dir) {
		t.Skip("no way to make a directory read-only here")
	}
	eachMode(t, deployOptions{config: "expectations: " + path + "\n"}, func(t *testing.T, d *deployment, h *hook) {
		if got := d.expectationsOf(""); got != first {
			t.Fatalf("default tenant's expectations %q, want the file's %q", got, first)
		}
		var body struct{ Error map[string]any }
		d.do("", "PUT", "/api/v1/expectations", "expectations:\n  - job: nightly\n    every: 2h\n", &body, http.StatusConflict)
		msg, _ := body.Error["message"].(string)
		if body.Error["code"] != "conflict" || !strings.Contains(msg, path) || !strings.Contains(msg, "may not write") {
			t.Errorf("the refusal is %v; want conflict, the file's path and that the server may not write it", body.Error)
		}
		want := map[string]string{"": first}
		for _, tenant := range tenants {
			want[tenant] = "expectations:\n  - job: " + tenant + "_job\n    every: 30m\n"
			d.do(tenant, "PUT", "/api/v1/expectations", want[tenant], nil, 200)
		}
		d.crash()
		for tenant, src := range want {
			if got := d.expectationsOf(tenant); got != src {
				t.Errorf("tenant %q's expectations after kill -9: %q, want %q", tenant, got, src)
			}
		}
	})
}

// In the three-process mode the alert process writes the default tenant's
// rules file, then saves the rules in Redis. When Redis refused the save,
// the PUT was answered "could not be saved, so they were not changed"
// while the file already held the new rules: the next start of any alert
// process ran rules the operator was told were refused. The file is now
// put back as it was.
func TestRulesRefusedByRedisLeaveTheFileAsItWas(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.txt")
	const first = "RULE first task_prefix: \"x_\" ON: failed NOTIFY: hook\n"
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{config: "rules: " + path + "\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	if got := d.rulesOf(""); got != first {
		t.Fatalf("default tenant's rules %q, want the file's %q", got, first)
	}
	// Redis refuses the save: the rules hash is a string now.
	rdb, err := redisstore.Open(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	key := d.prefix + ":alert:rules"
	if err := rdb.Set(t.Context(), key, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	d.do("", "PUT", "/api/v1/rules", "RULE second task_prefix: \"x_\" ON: failed NOTIFY: hook\n", nil, http.StatusServiceUnavailable)
	if b, err := os.ReadFile(path); err != nil || string(b) != first {
		t.Fatalf("after a PUT refused as not saved, the rules file holds %q (%v), want %q as before", b, err, first)
	}
}
