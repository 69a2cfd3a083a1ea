package alert_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// FileRules gives back every tenant's text after a new instance opens the
// directory (a restart), and a later Save replaces one tenant's file only.
func TestFileRulesRoundTrip(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "rules")
	if got, err := alert.NewFileRules(dir).Load(bg); err != nil || len(got) != 0 {
		t.Fatalf("no directory: %v, %v; want no rules", got, err)
	}
	st := alert.NewFileRules(dir)
	long := strings.Repeat("../\x00é", 100)
	for tenant, src := range map[string]string{"acme": `RULE a task_prefix: "a_" ON: failed`, "globex": "RULE g task_prefix: \"g_\" ON: failed\n", "": "", long: "# <long>"} {
		if err := st.Save(bg, tenant, []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	globex, err := os.Stat(st.TenantPath("globex"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Save(bg, "acme", []byte(`RULE a2 task_prefix: "a_" ON: timeout`)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(st.TenantPath("globex")); err != nil || !os.SameFile(fi, globex) || !fi.ModTime().Equal(globex.ModTime()) {
		t.Errorf("acme's save wrote globex's file again: %v", err)
	}
	got, err := alert.NewFileRules(dir).Load(bg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"acme": `RULE a2 task_prefix: "a_" ON: timeout`, "globex": "RULE g task_prefix: \"g_\" ON: failed\n", "": "", long: "# <long>"}
	if len(got) != len(want) {
		t.Fatalf("loaded %q, want %q", got, want)
	}
	for tenant, src := range want {
		if string(got[tenant]) != src {
			t.Errorf("tenant %q: %q, want %q", tenant, got[tenant], src)
		}
		if fi, err := os.Stat(st.TenantPath(tenant)); err != nil || fi.Mode().Perm() != 0o600 || filepath.Dir(st.TenantPath(tenant)) != dir {
			t.Errorf("tenant %q's file %s: %v, %v; want 0600 in %s", tenant, st.TenantPath(tenant), fi, err, dir)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("the rules directory is %v, want 0700", fi.Mode().Perm())
	}
}

// The one file of the releases before is moved into the directory by the
// first Load or Save; a move cut short (some tenants' files written, the
// old file still there) is finished by the next, and nothing is lost.
func TestFileRulesMovesTheOneFileOfBefore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "rules")
	old := map[string]string{"acme": "# acme's", "globex": "# globex's", "": "# the default's"}
	writeOld := func() {
		b, _ := json.Marshal(map[string]any{"version": 1, "tenants": old})
		if err := os.WriteFile(dir+".json", b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Cut short: acme's file was written, then the kill came.
	if err := alert.NewFileRules(dir).Save(bg, "acme", []byte(old["acme"])); err != nil {
		t.Fatal(err)
	}
	writeOld()
	for i, open := range []func(*alert.FileRules) (map[string][]byte, error){
		func(f *alert.FileRules) (map[string][]byte, error) { return f.Load(bg) },
		func(f *alert.FileRules) (map[string][]byte, error) {
			if err := f.Save(bg, "initech", []byte("# initech's")); err != nil {
				return nil, err
			}
			return alert.NewFileRules(dir).Load(bg)
		},
	} {
		if i == 1 {
			os.RemoveAll(dir)
			writeOld()
		}
		got, err := open(alert.NewFileRules(dir))
		if err != nil {
			t.Fatal(err)
		}
		for tenant, src := range old {
			if string(got[tenant]) != src {
				t.Errorf("case %d: tenant %q after the move: %q, want %q", i, tenant, got[tenant], src)
			}
		}
		if _, err := os.Stat(dir + ".json"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("case %d: the old file after the move: %v", i, err)
		}
	}
}

// A damaged file is an error that names the file and the way out, not an
// empty set of rules: running without a tenant's rules would look fine.
func TestFileRulesRefusesADamagedFile(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"truncated":     `{"version":2,"tenant":"acme","text":"RU`,
		"other version": `{"version":1,"tenant":"acme","text":""}`,
		"unknown field": `{"version":2,"tenant":"acme","text":"","extra":1}`,
		"trailing data": `{"version":2,"tenant":"acme","text":""} {}`,
		"another name":  `{"version":2,"tenant":"globex","text":""}`,
	} {
		st := alert.NewFileRules(filepath.Join(t.TempDir(), "rules"))
		if err := st.Save(bg, "acme", nil); err != nil {
			t.Fatal(err)
		}
		path := st.TenantPath("acme")
		os.WriteFile(path, []byte(body), 0o600)
		_, err := st.Load(bg)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, body := range map[string]string{
		"truncated":     `{"version":1,"tenants":{"acme":"RU`,
		"other version": `{"version":2,"tenants":{}}`,
		"unknown field": `{"version":1,"tenants":{},"extra":1}`,
		"trailing data": `{"version":1,"tenants":{}} {}`,
	} {
		dir := filepath.Join(t.TempDir(), "rules")
		os.WriteFile(dir+".json", []byte(body), 0o600)
		st := alert.NewFileRules(dir)
		_, err := st.Load(bg)
		if err == nil || !strings.Contains(err.Error(), dir+".json") || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("the old file, %s: %v", name, err)
		}
		if err := st.Save(bg, "acme", nil); err == nil {
			t.Errorf("the old file, %s: Save wrote beside a damaged file", name)
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

// Each tenant's file is bounded by itself: two tenants whose texts
// together pass MaxRulesFileBytes are both kept (the one file of every
// tenant refused the second), and a text that alone would pass it is
// refused with 413, nothing changed.
func TestFileRulesBoundsEachTenantsFile(t *testing.T) {
	t.Parallel()
	ctx := bg
	f := alert.NewFileRules(filepath.Join(t.TempDir(), "rules"))
	big := strings.Repeat("# padding\n", alert.MaxRulesFileBytes/20)
	for _, tenant := range []string{"acme", "globex"} {
		if err := f.Save(ctx, tenant, []byte(big)); err != nil {
			t.Fatalf("tenant %s: %v", tenant, err)
		}
	}
	err := f.Save(ctx, "acme", []byte(big+big))
	if e, ok := errors.AsType[*apollo.Error](err); !ok || e.Code != apollo.ETOOLARGE || !strings.Contains(e.Message, "over its limit of 64 MiB") {
		t.Fatalf("Save past the bound = %v, want too_large", err)
	}
	m, err := f.Load(ctx)
	if err != nil || len(m) != 2 || string(m["acme"]) != big || string(m["globex"]) != big {
		t.Fatalf("Load after the refusal: %d tenants, %v; want acme's and globex's as before", len(m), err)
	}
}

// WriteLegacy leaves every tenant's text in the one file a release before
// reads, for a rollback. The next Load of this release removes it without
// writing the tenants' files again when no release before changed it,
// and moves in what one changed.
func TestFileRulesWritesTheOneFileForARollback(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "rules")
	st := alert.NewFileRules(dir)
	for _, tenant := range []string{"acme", "globex"} {
		if err := st.Save(bg, tenant, []byte("# "+tenant+"'s")); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.WriteLegacy(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dir + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Version int
		Tenants map[string]string
	}
	if err := json.Unmarshal(b, &old); err != nil || old.Version != 1 || len(old.Tenants) != 2 || old.Tenants["acme"] != "# acme's" {
		t.Fatalf("the one file for a rollback: %s, %v", b, err)
	}
	acme, _ := os.Stat(st.TenantPath("acme"))
	if _, err := alert.NewFileRules(dir).Load(bg); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(st.TenantPath("acme")); err != nil || !os.SameFile(fi, acme) {
		t.Errorf("acme's file was written again from the unchanged one file: %v", err)
	}
	if _, err := os.Stat(dir + ".json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the one file after the next start: %v", err)
	}

	// A rollback: the release before changes globex's text.
	if err := st.WriteLegacy(); err != nil {
		t.Fatal(err)
	}
	old.Tenants["globex"] = "# globex's, changed"
	b, _ = json.Marshal(old)
	if err := os.WriteFile(dir+".json", b, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := alert.NewFileRules(dir).Load(bg)
	if err != nil || string(m["globex"]) != "# globex's, changed" || string(m["acme"]) != "# acme's" {
		t.Errorf("after the rollback's change: %q, %v", m, err)
	}
}
