package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/config"
)

// A rules or expectations file named among the server's own files in the
// data directory (rules: DATA/rules, the directory of the tenants' rules
// saved through the API; expectations: DATA/expectations.json, the one
// file of the releases before) is refused at start, with what to change,
// and the file is left as it was. Before, the server failed with "not a
// directory", or took the file for its own. A rules file beside them
// (DATA/rules.txt) works: two tenants' rules saved through the API are
// kept apart from it across a kill -9 and fire, and the data directory
// holds nothing but config.DataNames and that file.
func TestRulesFileAmongTheDataDirectorysOwnIsRefused(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{})
	data := filepath.Join(d.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	const defaultRules = "RULE default_failed task_prefix: \"default_\" ON: failed NOTIFY: hook\n"
	for _, tc := range []struct{ flag, name, src string }{
		{"--rules", "rules", defaultRules},
		{"--expectations", "expectations.json", "expectations:\n  - job: nightly\n    every: 24h\n"},
	} {
		path := filepath.Join(data, tc.name)
		if err := os.WriteFile(path, []byte(tc.src), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], append(slices.Clone(d.args), tc.flag, path)...)
		cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("apollo %s %s: %v, want a refusal\n%s", tc.flag, path, err, out)
		}
		want := tc.flag[2:] + ": " + path + " is where the server keeps its own " + tc.name + " in the data directory"
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "move the file out of "+path) {
			t.Errorf("apollo %s %s said\n%s\nwant %q and what to change", tc.flag, path, out, want)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != tc.src {
			t.Errorf("%s after the refused start: %q, %v; want it as it was", path, b, err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}

	rulesFile := filepath.Join(data, "rules.txt")
	if err := os.WriteFile(rulesFile, []byte(defaultRules), 0o600); err != nil {
		t.Fatal(err)
	}
	d.args = append(d.args, "--rules", rulesFile)
	d.start()
	defer d.logOnFailure()
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", eventRule(tenant), nil, 200)
	}
	d.crash()
	for _, tenant := range tenants {
		if got := d.rulesOf(tenant); got != eventRule(tenant) {
			t.Errorf("tenant %s after a kill -9: rules %q, want %q", tenant, got, eventRule(tenant))
		}
	}
	if got := d.rulesOf(""); got != defaultRules {
		t.Errorf("the default tenant's rules after a kill -9: %q, want the file's %q", got, defaultRules)
	}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitEachFiring(t, h, tenants)
	es, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		// Names with a leading dot are atomicfile's temporary files.
		if e.Name() != "rules.txt" && !strings.HasPrefix(e.Name(), ".") && !slices.Contains(config.DataNames, e.Name()) {
			t.Errorf("the data directory holds %s, which config.DataNames does not name: a rules file of that name would be taken for it", e.Name())
		}
	}
}
