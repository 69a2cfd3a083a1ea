package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mountConfigMap lays dir out as Kubernetes mounts a ConfigMap with the
// key rules.txt, and updates it as the kubelet does: the content goes to
// a new directory ..VERSION, the link ..data is swapped to it in one
// rename, and rules.txt stays a link to ..data/rules.txt.
func mountConfigMap(t *testing.T, dir, version, src string) {
	t.Helper()
	v := filepath.Join(dir, ".."+version)
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v, "rules.txt"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(".."+version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "rules.txt")); err != nil {
		if err := os.Symlink(filepath.Join("..data", "rules.txt"), filepath.Join(dir, "rules.txt")); err != nil {
			t.Fatal(err)
		}
	}
}

// rulesOf is the rules text tenant's GET /api/v1/rules answers.
func (d *deployment) rulesOf(tenant string) string {
	d.t.Helper()
	var got struct{ Source string }
	d.do(tenant, "GET", "/api/v1/rules", "", &got, 200)
	return got.Source
}

// A rules file mounted from a ConfigMap (a link through ..data) stays a
// link when the default tenant's rules are PUT: the PUT is written to the
// file the link points to, and the next update of the ConfigMap is still
// loaded. Before, the PUT replaced the link with a regular file, and every
// later update of the ConfigMap was silently never seen. A file the server
// may not write (a read-only mount) refuses the PUT with 409 and a message
// naming the file, instead of 500 internal error; other tenants' PUTs,
// kept in the data directory or Redis, go on.
func TestRulesFileFromAConfigMap(t *testing.T) {
	cm := t.TempDir()
	path := filepath.Join(cm, "rules.txt")
	version := 0
	update := func(src string) {
		version++
		mountConfigMap(t, cm, fmt.Sprintf("2026_%02d", version), src)
	}
	update("# apollo: empty\n")
	eachMode(t, deployOptions{config: "rules: " + path + "\n"}, func(t *testing.T, d *deployment, h *hook) {
		// The modes run one after the other on the one mount: start each
		// from a known file.
		first := fmt.Sprintf("RULE cm_first_%d task_prefix: \"cm_\" ON: failed NOTIFY: hook\n", version)
		update(first)
		eventually(t, 20*time.Second, "the first ConfigMap version loaded", func() bool { return d.rulesOf("") == first })

		put := "RULE cm_put task_prefix: \"cm_\" ON: failed NOTIFY: hook\n"
		d.do("", "PUT", "/api/v1/rules", put, nil, 200)
		acme := "RULE acme_failed task_prefix: \"acme_\" ON: failed NOTIFY: hook\n"
		d.do("acme", "PUT", "/api/v1/rules", acme, nil, 200)
		if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("after the PUT the rules file is %v (%v), want still a link", fi.Mode(), err)
		}
		if b, _ := os.ReadFile(path); string(b) != put {
			t.Fatalf("the file behind the link holds %q, want the PUT's %q", b, put)
		}

		d.crash()
		if got := d.rulesOf(""); got != put {
			t.Fatalf("default tenant's rules after kill -9: %q, want %q", got, put)
		}
		if got := d.rulesOf("acme"); got != acme {
			t.Fatalf("acme's rules after kill -9: %q, want %q", got, acme)
		}

		// The ConfigMap is updated: the server loads it and acts on it.
		next := "RULE cm_next task_prefix: \"cm_\" ON: failed NOTIFY: hook\n"
		update(next)
		eventually(t, 20*time.Second, "the updated ConfigMap loaded", func() bool { return d.rulesOf("") == next })
		d.fail("", "cm_job")
		d.fail("acme", "acme_job")
		awaitTenants(t, h, "firing", map[string]string{"": "cm_next", "acme": "acme_failed"})

		// A read-only mount, as a ConfigMap is.
		current := filepath.Join(cm, fmt.Sprintf("..2026_%02d", version))
		if !readOnly(t, current) {
			t.Log("no way to make a directory read-only here: the read-only part is not tried")
			return
		}
		var body json.RawMessage
		d.do("", "PUT", "/api/v1/rules", "RULE cm_refused task_prefix: \"cm_\" ON: failed NOTIFY: hook\n", &body, http.StatusConflict)
		if !strings.Contains(string(body), path) || !strings.Contains(string(body), "may not write") {
			t.Errorf("the refusal says %s; want the file's path and that the server may not write it", body)
		}
		if got := d.rulesOf(""); got != next {
			t.Errorf("after a refused PUT the rules are %q, want the file's %q", got, next)
		}
		d.do("globex", "PUT", "/api/v1/rules", "RULE globex_failed task_prefix: \"globex_\" ON: failed NOTIFY: hook\n", nil, 200)
	})
}

// readOnly makes dir unwritable for this process, as a read-only mount
// is: without write permission, or, for root (whom permissions do not
// stop), immutable (chattr +i, which needs CAP_LINUX_IMMUTABLE and a file
// system that has the attribute). It reports whether a file can no longer
// be made in dir; the test's end makes dir writable again.
func readOnly(t *testing.T, dir string) bool {
	t.Helper()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if !canWrite(dir) {
		return true
	}
	if exec.Command("chattr", "+i", dir).Run() != nil {
		return false
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v %s", dir, err, out)
		}
	})
	return !canWrite(dir)
}

func canWrite(dir string) bool {
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}
