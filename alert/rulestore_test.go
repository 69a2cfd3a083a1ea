package alert_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// FileRules gives back every tenant's text after a new instance opens the
// file (a restart), and a later Save replaces one tenant's text only.
func TestFileRulesRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.json")
	if got, err := alert.NewFileRules(path).Load(bg); err != nil || len(got) != 0 {
		t.Fatalf("no file: %v, %v; want no rules", got, err)
	}
	st := alert.NewFileRules(path)
	for tenant, src := range map[string]string{"acme": `RULE a task_prefix: "a_" ON: failed`, "globex": "RULE g task_prefix: \"g_\" ON: failed\n", "": ""} {
		if err := st.Save(bg, tenant, []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Save(bg, "acme", []byte(`RULE a2 task_prefix: "a_" ON: timeout`)); err != nil {
		t.Fatal(err)
	}
	got, err := alert.NewFileRules(path).Load(bg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"acme": `RULE a2 task_prefix: "a_" ON: timeout`, "globex": "RULE g task_prefix: \"g_\" ON: failed\n", "": ""}
	if len(got) != len(want) {
		t.Fatalf("loaded %q, want %q", got, want)
	}
	for tenant, src := range want {
		if string(got[tenant]) != src {
			t.Errorf("tenant %q: %q, want %q", tenant, got[tenant], src)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("the rules file is %v, want 0600", fi.Mode().Perm())
	}
}

// A damaged file is an error that names the file and the way out, not an
// empty set of rules: running without a tenant's rules would look fine.
func TestFileRulesRefusesADamagedFile(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"truncated":     `{"version":1,"tenants":{"acme":"RU`,
		"other version": `{"version":2,"tenants":{}}`,
		"unknown field": `{"version":1,"tenants":{},"extra":1}`,
		"trailing data": `{"version":1,"tenants":{}} {}`,
	} {
		path := filepath.Join(t.TempDir(), "rules.json")
		os.WriteFile(path, []byte(body), 0o600)
		st := alert.NewFileRules(path)
		_, err := st.Load(bg)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("%s: %v", name, err)
		}
		if err := st.Save(bg, "acme", nil); err == nil {
			t.Errorf("%s: Save wrote over a damaged file", name)
		}
	}
}

// SyncRules sets what differs, leaves the tenants kept by a file alone,
// and sets the others when one tenant's text does not parse.
func TestSyncRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `RULE file task_prefix: "f_" ON: failed`, newTable(), nil)
	acme := []byte(`RULE a task_prefix: "a_" ON: failed`)
	saved := map[string][]byte{
		"":       []byte(`RULE api task_prefix: "x_" ON: failed`),
		"acme":   acme,
		"globex": []byte(`RULE g task_prefix: "g_" ON: faild`),
	}
	set, err := f.eng.SyncRules(saved, func(tenant string) bool { return tenant == "" })
	if len(set) != 1 || set[0] != "acme" {
		t.Errorf("set %v, want [acme]", set)
	}
	if err == nil || !strings.Contains(err.Error(), `tenant "globex"`) {
		t.Errorf("err %v, want the tenant whose rules do not parse", err)
	}
	if rs := f.eng.Rules(""); len(rs) != 1 || rs[0].Name != "file" {
		t.Errorf("the default tenant's rules %v: the file's must stay", rs)
	}
	if string(f.eng.RulesSource("acme")) != string(acme) {
		t.Errorf("acme runs %q", f.eng.RulesSource("acme"))
	}
	if set, err := f.eng.SyncRules(map[string][]byte{"acme": acme}, nil); len(set) != 0 || err != nil {
		t.Errorf("the same text again: set %v, %v", set, err)
	}
}

// A save that would make the file larger than the start reads is refused
// with 413 and changes nothing: the server never writes a file its next
// start refuses. Two tenants: the second's text no longer fits beside the
// first's.
func TestFileRulesRefusesAFileOverItsBound(t *testing.T) {
	t.Parallel()
	ctx := bg
	f := alert.NewFileRules(filepath.Join(t.TempDir(), "rules.json"))
	big := strings.Repeat("# padding\n", alert.MaxRulesFileBytes/20)
	if err := f.Save(ctx, "acme", []byte(big)); err != nil {
		t.Fatal(err)
	}
	err := f.Save(ctx, "globex", []byte(big))
	if e, ok := errors.AsType[*apollo.Error](err); !ok || e.Code != apollo.ETOOLARGE || !strings.Contains(e.Message, "over its limit of 64 MiB") {
		t.Fatalf("Save past the bound = %v, want too_large", err)
	}
	m, err := f.Load(ctx)
	if err != nil || len(m) != 1 || string(m["acme"]) != big {
		t.Fatalf("Load after the refusal: %d tenants, %v; want acme's alone", len(m), err)
	}
}
