package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// sandboxScript runs "$@" with the directory $1 read-only, but for the
// directories listed (one per line) in $2 inside it, as systemd's
// ProtectSystem=strict and ReadWritePaths= leave a unit's file system.
const sandboxScript = `set -e
root=$1; writable=$2; shift 2
mount --make-rprivate /
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
while IFS= read -r p; do
  [ -d "$p" ] || continue  # a "-" path that is not there
  mount --bind "$p" "$p"
  mount -o remount,bind,rw "$p"
done < "$writable"
exec "$@"`

// unitSandbox is a file system as the unit deploy/NAME leaves it, under
// root: read-only but for the unit's ReadWritePaths, moved from / to root,
// with the directories docs/deploy.md makes (/etc/apollo/rules and
// /var/lib/apollo). cfg is deploy/apollo.yaml with edit applied, moved
// there, listening on port 0; start runs apollo args... in the sandbox,
// with the environment apollo.env would give. It skips where no read-only
// mount can be made. edit sees the file's paths as the unit's (/etc/apollo).
func unitSandbox(t *testing.T, name string, edit func(cfg string) string) (root, cfg string, start func(args ...string) *proc) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1) for a read-only mount")
	}
	unit, err := os.ReadFile(exRepoFile(t, "deploy/"+name))
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(exRepoFile(t, "deploy/apollo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	moved := strings.NewReplacer("/etc/apollo", filepath.Join(root, "etc/apollo"), "/var/lib/apollo", filepath.Join(root, "var/lib/apollo"))
	var writable strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(unit)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ReadWritePaths="); ok {
			for _, p := range strings.Fields(v) {
				writable.WriteString(moved.Replace(strings.TrimPrefix(p, "-")) + "\n")
			}
		}
	}
	list := filepath.Join(t.TempDir(), "writable")
	os.WriteFile(list, []byte(writable.String()), 0o600)
	// What docs/deploy.md installs.
	for _, d := range []string{"etc/apollo/rules", "var/lib/apollo"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	cfgText := strings.Replace(moved.Replace(edit(string(yaml))), "listen: 127.0.0.1:1969", "listen: 127.0.0.1:0", 1)
	cfg = filepath.Join(root, "etc/apollo/apollo.yaml")
	os.WriteFile(cfg, []byte(cfgText), 0o640)
	os.WriteFile(filepath.Join(root, "etc/apollo/rules/rules.txt"), []byte(`RULE batch_failures task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m NOTIFY: oncall-ding`+"\n"), 0o640)

	probe := exec.Command(unshare, "--mount", "sh", "-c", `mount --make-rprivate / && mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"`, "sh", root)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot make a read-only mount in a mount namespace here (%v: %s)", err, out)
	}
	return root, cfg, func(args ...string) *proc {
		cmd := exec.Command(unshare, append([]string{"--mount", "sh", "-c", sandboxScript, "sh", root, list, os.Args[0]}, args...)...)
		cmd.Env = []string{"DINGTALK_TOKEN=t", "DINGTALK_SECRET=SECtest", "SMTP_PASSWORD=p"}
		return startCmd(t, cmd, apiclient.ReadyPrefix)
	}
}

// apollo server as deploy/apollo.service runs it, with deploy/apollo.yaml
// and the directories docs/deploy.md makes, under a read-only file system
// but for the unit's ReadWritePaths: what the server writes by default is
// written, and is there after a kill -9 and a restart. Before, the unit
// let it write only /var/lib/apollo, so the rules set through the API
// (written back to the rules file that apollo.yaml names, in
// /etc/apollo/rules) were refused with 409 on every host installed as
// the docs say.
func TestDeployServerUnitLetsTheServerWrite(t *testing.T) {
	t.Parallel()
	_, cfg, start := unitSandbox(t, "apollo.service", func(cfg string) string { return cfg })
	srv := start("server", "--config", cfg)
	put := `RULE batch_failures task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.1 DURATION: 2m NOTIFY: oncall-ding` + "\n"
	req, _ := http.NewRequest("PUT", "http://"+srv.addr+"/api/v1/rules", strings.NewReader(put))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /api/v1/rules in the unit's sandbox: %d %s", resp.StatusCode, body.String())
	}
	srv.kill()
	srv = start("server", "--config", cfg)
	var got struct {
		Source string `json:"source"`
	}
	apiGet(t, srv.addr, "/api/v1/rules", &got)
	if !strings.Contains(got.Source, "failed_rate > 0.1") {
		t.Errorf("after kill -9 and restart the rules are %q, want the PUT's", got.Source)
	}
}

// apollo bus as deploy/apollo-bus.service runs it, with deploy/apollo.yaml
// naming Redis and an expectations file kept where docs/deploy.md says
// (/etc/apollo/rules), two tenants: the expectations each sets through
// the API are written (the default tenant's back to that file, the other's
// in the data directory), and are there after a kill -9 and a restart.
// Before, the unit let the bus write only /var/lib/apollo, and the default
// tenant's PUT /api/v1/expectations was refused.
func TestDeployBusUnitLetsTheBusWrite(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t) // registered first: cleaned up after the bus is killed
	redis := redistest.URLFor(t, prefix)
	tokens := map[string]string{}
	var auth strings.Builder
	auth.WriteString("  tokens:\n")
	for _, tenant := range []string{"", tenants[0]} {
		secret, tok, err := httpapi.NewToken("admin-"+tenant, httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		tokens[tenant] = secret
		fmt.Fprintf(&auth, "    - {name: admin-%s, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	root, cfg, start := unitSandbox(t, "apollo-bus.service", func(cfg string) string {
		if !strings.Contains(cfg, "  tokens:\n") {
			t.Fatal("deploy/apollo.yaml has no auth.tokens to add to")
		}
		cfg = strings.Replace(cfg, "  tokens:\n", auth.String(), 1)
		return cfg + fmt.Sprintf("redis:\n  url: %s\n  prefix: %s\nexpectations: /etc/apollo/rules/expectations.yaml\n", redis, prefix)
	})
	xfile := filepath.Join(root, "etc/apollo/rules/expectations.yaml")
	if err := os.WriteFile(xfile, []byte("expectations:\n  - job: nightly_backup\n    every: 24h\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	bus := start("bus", "--config", cfg)
	put := map[string]string{}
	for tenant, secret := range tokens {
		put[tenant] = fmt.Sprintf("expectations:\n  - job: %s_etl\n    every: 1h\n", cmp.Or(tenant, "default"))
		req, _ := http.NewRequest("PUT", "http://"+bus.addr+"/api/v1/expectations", strings.NewReader(put[tenant]))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT /api/v1/expectations of tenant %q in the bus unit's sandbox: %d %s", tenant, resp.StatusCode, body)
		}
	}
	bus.kill()
	bus = start("bus", "--config", cfg)
	for tenant, secret := range tokens {
		req, _ := http.NewRequest("GET", "http://"+bus.addr+"/api/v1/expectations", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Source string `json:"source"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || got.Source != put[tenant] {
			t.Errorf("tenant %q after kill -9 and restart: expectations %q (%v), want the PUT's %q", tenant, got.Source, err, put[tenant])
		}
	}
	if b, err := os.ReadFile(xfile); err != nil || string(b) != put[""] {
		t.Errorf("the expectations file apollo.yaml names holds %q (%v), want the default tenant's PUT", b, err)
	}
}
