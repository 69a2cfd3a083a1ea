package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/rulebook"
)

// manyTenants are the tenants past acme and globex of the tests that need
// more than two.
func manyTenants(n int) []string {
	var more []string
	for i := len(tenants) + 1; i <= n; i++ {
		more = append(more, fmt.Sprintf("t%02d", i))
	}
	return more
}

// eventRule is tenant's rule that fires on a failed run of its jobs.
func eventRule(tenant string) string {
	return fmt.Sprintf("RULE %s_failed task_prefix: %q ON: failed NOTIFY: hook\n", tenant, tenant+"_")
}

// awaitEachFiring waits for a firing of each tenant's rule eventRule.
func awaitEachFiring(t *testing.T, h *hook, all []string) {
	t.Helper()
	got := map[string]bool{}
	for len(got) < len(all) {
		p := h.await(t, 30*time.Second, "each tenant's firing", func(p webhook.ApolloPayload) bool {
			return p.Kind == apollo.NotifyFiring && !got[p.Alert.Tenant] && p.Alert.Rule == p.Alert.Tenant+"_failed"
		})
		got[p.Alert.Tenant] = true
	}
}

// Each tenant's rules saved through the API are kept in a file of the
// tenant's own, bounded by its own size: twenty tenants each saving a
// text near the request body's limit (4 MiB) are all kept, 80 MiB in
// all, where the one file of every tenant stopped at 64 MiB and refused
// the seventeenth for the others' texts. A save writes its tenant's file
// alone. After a kill -9 each tenant reads its own text back, and its
// rule fires.
func TestRulesOfTwentyTenantsAtTheBodyLimitAreKept(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	more := manyTenants(20)
	all := slices.Concat(tenants, more)
	d := startDeployment(t, false, h, deployOptions{moreTenants: more})
	pad := strings.Repeat("# padding\n", (4<<20-4096)/10)
	src := map[string]string{}
	firstPath := filepath.Join(d.dir, "data", savedFile("rules", all[0]))
	var first os.FileInfo
	for i, tenant := range all {
		src[tenant] = eventRule(tenant) + pad
		d.do(tenant, "PUT", "/api/v1/rules", src[tenant], nil, 200)
		if i == 0 {
			first, _ = os.Stat(firstPath)
		}
	}
	statOne(t, filepath.Dir(firstPath), len(all))
	if fi, err := os.Stat(firstPath); err != nil || first == nil || !os.SameFile(fi, first) || !fi.ModTime().Equal(first.ModTime()) {
		t.Errorf("the first tenant's file was written again by the others' saves: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "data", "rules.json")); err == nil {
		t.Error("rules.json written beside the tenants' files")
	}

	d.crash()
	for _, tenant := range all {
		var r struct{ Source string }
		d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
		if r.Source != src[tenant] {
			t.Errorf("tenant %s after a kill -9: %d bytes of rules, want its own %d", tenant, len(r.Source), len(src[tenant]))
		}
	}
	for _, tenant := range all {
		d.fail(tenant, tenant+"_load")
	}
	awaitEachFiring(t, h, all)
}

// statOne returns one file of the n that dir must hold.
func statOne(t *testing.T, dir string, n int) os.FileInfo {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != n {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %v, want %d files", dir, names, n)
	}
	fi, err := es[0].Info()
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// The one rules.json and expectations.json of the releases before are
// moved into a file per tenant at the first start, even after a kill -9
// in the middle of the move (some tenants' files written, the old file
// still there): every tenant's rules and expectations are read back and
// act, the old files are gone, and a kill -9 after the move loses
// nothing either.
func TestOldRulesFilesAreMovedAcrossAKill(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := startDeployment(t, false, h, deployOptions{})
	data := filepath.Join(d.dir, "data")
	d.api.kill()

	rules, expects := map[string]string{}, map[string]string{}
	for _, tenant := range tenants {
		rules[tenant] = eventRule(tenant)
		expects[tenant] = fmt.Sprintf("expectations:\n  - job: %s_nightly\n    every: 24h\n", tenant)
	}
	// What a start killed while moving the files left: acme's files
	// written, then the old ones, still there, that hold them all.
	for name, texts := range map[string]map[string]string{"rules": rules, "expectations": expects} {
		if err := alert.NewFileRules(filepath.Join(data, name)).Save(context.Background(), "acme", []byte(texts["acme"])); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(map[string]any{"version": 1, "tenants": texts})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, name+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	d.start()
	readBack := func(when string) {
		t.Helper()
		for _, tenant := range tenants {
			var r, x struct{ Source string }
			d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
			d.do(tenant, "GET", "/api/v1/expectations", "", &x, 200)
			if r.Source != rules[tenant] || x.Source != expects[tenant] {
				t.Errorf("tenant %s %s: rules %q, expectations %q; want %q and %q", tenant, when, r.Source, x.Source, rules[tenant], expects[tenant])
			}
		}
	}
	readBack("after the move")
	for _, name := range []string{"rules", "expectations"} {
		if _, err := os.Stat(filepath.Join(data, name+".json")); err == nil {
			t.Errorf("%s.json is still there after the move", name)
		}
		statOne(t, filepath.Join(data, name), len(tenants))
	}
	d.crash()
	readBack("after a kill -9 after the move")
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitEachFiring(t, h, tenants)
}

// savedFile is the path, in the data directory, of the file that keeps
// tenant's text of kind (rules or expectations) set through the API.
func savedFile(kind, tenant string) string {
	return filepath.Join(kind, filepath.Base(alert.NewFileRules(kind).TenantPath(tenant)))
}

// manyRules is a rules text of n event rules of tenant.
func manyRules(tenant string, n int) string {
	var b strings.Builder
	b.WriteString(eventRule(tenant))
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "RULE %s_r%06d task_prefix: \"%s_%06d_\" ON: failed NOTIFY: hook\n", tenant, i, tenant, i)
	}
	return b.String()
}

// A tenant's rules are bounded by count (rulebook.MaxRules): a PUT of one
// more is refused with 413, the count and the limit, and nothing changes;
// before, 100 000 rules in 4 MiB were accepted and GET /api/v1/rules
// answered 26 MB. The other tenant's PUT at the limit is kept across a
// kill -9, and both tenants' rules act.
func TestRulesPastTheCountLimitAreRefused(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := startDeployment(t, false, h, deployOptions{})
	d.do("acme", "PUT", "/api/v1/rules", eventRule("acme"), nil, 200)
	var e struct{ Error apollo.Error }
	d.do("acme", "PUT", "/api/v1/rules", manyRules("acme", rulebook.MaxRules+1), &e, 413)
	if want := fmt.Sprintf("%d rules, over the limit of %d", rulebook.MaxRules+1, rulebook.MaxRules); e.Error.Code != apollo.ETOOLARGE ||
		!strings.Contains(e.Error.Message, want) || !strings.Contains(e.Error.Message, "nothing was changed") || e.Error.Hint == "" {
		t.Errorf("a PUT past the limit answered %+v; want too_large saying %q and what to do", e.Error, want)
	}
	atLimit := manyRules("globex", rulebook.MaxRules)
	d.do("globex", "PUT", "/api/v1/rules", atLimit, nil, 200)

	d.crash()
	want := map[string]string{"acme": eventRule("acme"), "globex": atLimit}
	for _, tenant := range tenants {
		var r struct{ Source string }
		d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
		if r.Source != want[tenant] {
			t.Errorf("tenant %s after a kill -9: %d bytes of rules, want %d", tenant, len(r.Source), len(want[tenant]))
		}
	}
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitEachFiring(t, h, tenants)
}
