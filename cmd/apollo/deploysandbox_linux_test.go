package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
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
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1) for a read-only mount")
	}
	unit, err := os.ReadFile(exRepoFile(t, "deploy/apollo.service"))
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(exRepoFile(t, "deploy/apollo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
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
	cfgText := strings.Replace(moved.Replace(string(yaml)), "listen: 127.0.0.1:1969", "listen: 127.0.0.1:0", 1)
	cfg := filepath.Join(root, "etc/apollo/apollo.yaml")
	os.WriteFile(cfg, []byte(cfgText), 0o640)
	os.WriteFile(filepath.Join(root, "etc/apollo/rules/rules.txt"), []byte(`RULE batch_failures task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m NOTIFY: oncall-ding`+"\n"), 0o640)

	probe := exec.Command(unshare, "--mount", "sh", "-c", `mount --make-rprivate / && mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"`, "sh", root)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot make a read-only mount in a mount namespace here (%v: %s)", err, out)
	}
	start := func() *proc {
		cmd := exec.Command(unshare, "--mount", "sh", "-c", sandboxScript, "sh", root, list, os.Args[0], "server", "--config", cfg)
		cmd.Env = []string{"DINGTALK_TOKEN=t", "DINGTALK_SECRET=SECtest", "SMTP_PASSWORD=p"}
		return startCmd(t, cmd, apiclient.ReadyPrefix)
	}
	srv := start()
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
	srv = start()
	var got struct {
		Source string `json:"source"`
	}
	apiGet(t, srv.addr, "/api/v1/rules", &got)
	if !strings.Contains(got.Source, "failed_rate > 0.1") {
		t.Errorf("after kill -9 and restart the rules are %q, want the PUT's", got.Source)
	}
}
