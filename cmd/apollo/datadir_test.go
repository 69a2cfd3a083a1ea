package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// A failed start removes the data directory only if it made it and
// nothing worth keeping is in it (issue 21).
func TestRemoveUnusedDataDir(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		files    map[string]string // path under the data directory -> content
		logEmpty bool
		removed  bool
	}{
		{"as a failed start leaves it", map[string]string{"wal/LOCK": "", "wal/00000000000000000001.wal": "header", "audit/audit.jsonl": ""}, true, true},
		{"a record in the log", map[string]string{"wal/00000000000000000001.wal": "header and a record"}, false, false},
		{"a file with data", map[string]string{"wal/LOCK": "", "alerts.json": "{}"}, true, false},
		{"a segment elsewhere", map[string]string{"other/1.wal": "data"}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			top := filepath.Join(t.TempDir(), "new")
			data := filepath.Join(top, "nested", "data")
			created, err := makeDataDir(data)
			if err != nil {
				t.Fatal(err)
			}
			if created != top {
				t.Fatalf("created %q, want the outermost new directory %q", created, top)
			}
			for name, body := range tc.files {
				p := filepath.Join(data, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := removeUnusedDataDir(created, tc.logEmpty); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(top); (err != nil) != tc.removed {
				t.Errorf("removed: %v, want %v", err != nil, tc.removed)
			}
		})
	}
	t.Run("there before", func(t *testing.T) {
		t.Parallel()
		data := t.TempDir()
		created, err := makeDataDir(data)
		if err != nil || created != "" {
			t.Fatalf("makeDataDir of an existing directory: %q, %v; want \"\"", created, err)
		}
		if err := removeUnusedDataDir(created, true); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(data); err != nil {
			t.Errorf("an existing data directory was removed: %v", err)
		}
	})
}

// A start that a file's permissions stopped (a data directory restored
// as root, a server run as apollo) says what to do; other errors pass as
// they are.
func TestPermissionHint(t *testing.T) {
	t.Parallel()
	denied := fmt.Errorf("opening the log: %w", &fs.PathError{Op: "open", Path: "/var/lib/apollo/wal/LOCK", Err: syscall.EACCES})
	got := permissionHint(denied, "/var/lib/apollo").Error()
	for _, want := range []string{"opening the log: open /var/lib/apollo/wal/LOCK: permission denied", "the data directory /var/lib/apollo", "chown -R"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	other := errors.New("opening the log: no space left on device")
	if got := permissionHint(other, "/d"); got != other {
		t.Errorf("another error became %v", got)
	}
}

// What the server keeps is readable by its own user only: task data
// (reports' extras and output, error messages), the archive, the audit
// log, rules, silences and the notifications owed. The data directory and
// its subdirectories were made 0755 and the log, snapshots and archive
// 0644, so every local user could read every tenant's runs. A fresh data
// directory now has nothing for group or others, under the usual umask.
func TestDataDirectoryIsPrivate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{config: "retention:\n  finished: 1s\nsnapshot_every: 1s\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.setEventRules()
	for _, tenant := range tenants {
		d.silence(tenant, `"rule":"`+tenant+`_quiet"`)
		d.putExpectations(tenant, "expectations:\n  - job: "+tenant+"_nightly\n    schedule: \"0 3 * * *\"\n")
		d.fail(tenant, tenant+"_load")
	}
	eventually(t, 30*time.Second, "the runs archived", func() bool {
		return d.figure("apollo_tasks_evicted_total") >= float64(len(tenants))
	})
	taken := d.figure("apollo_checkpoints_total")
	eventually(t, 30*time.Second, "a checkpoint after the eviction", func() bool {
		return d.figure("apollo_checkpoints_total") > taken
	})
	d.api.term(t)
	kinds := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(d.dir, "data"), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: readable beyond the server's user", path, fi.Mode().Perm())
		}
		rel, _ := filepath.Rel(d.dir, path)
		kinds[strings.SplitN(rel, string(filepath.Separator), 3)[min(1, strings.Count(rel, string(filepath.Separator)))]] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wal", "archive", "audit"} {
		if !kinds[want] {
			t.Errorf("no %s in the data directory (%v): the test looked at less than it says", want, kinds)
		}
	}
}

// A restore made as root, then the server started as its service user:
// whatever part of the copy still belongs to root (the whole directory,
// the archive, the audit log, a file written through the API, the
// scheduler's state) stops the start with the one thing to do, chown, and
// never with advice that loses data ("move it away" for the archive, or
// "restore it from a backup" for the scheduler's state, which was read by
// nobody and was fine). Once chowned, the copy holds both tenants' runs,
// rules and silences, and the pause.
func TestRestoreOwnedByAnotherUserSaysChown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs the server as another user than the owner of the copy")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{jobs: "jobs:\n  - name: held\n    schedule: \"@every 1s\"\n    command: [\"true\"]\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.setEventRules()
	ids := map[string]string{}
	for _, tenant := range tenants {
		d.silence(tenant, `"rule":"`+tenant+`_quiet"`)
		d.fail(tenant, tenant+"_kept")
		ids[tenant] = fmt.Sprintf("%s_kept-%d", tenant, d.seq.Load())
	}
	d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)
	d.api.term(t)

	// The service user: nobody, who must reach the binary, the
	// configuration and the copy.
	const uid, gid = 65534, 65534
	bin := filepath.Join(d.dir, "apollo.test")
	if out, err := exec.Command("cp", os.Args[0], bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, p := range []string{filepath.Dir(d.dir), d.dir, bin, filepath.Join(d.dir, "apollo.yaml"), filepath.Join(d.dir, "jobs.yaml")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(d.dir, "backup")
	if out, err := exec.Command("cp", "-R", filepath.Join(d.dir, "data"), backup).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	d.args[slices.Index(d.args, "--data")+1] = backup
	chown := func(owner int, path string, recursive bool) {
		t.Helper()
		args := []string{fmt.Sprintf("%d:%d", owner, owner), path}
		if recursive {
			args = append([]string{"-R"}, args...)
		}
		if out, err := exec.Command("chown", args...).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	asNobody := func() *exec.Cmd {
		cmd := exec.Command(bin, d.args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		return cmd
	}
	for _, name := range []string{"", "archive", "audit", "alerts.json", "rules", "outbox.jsonl", "sched/sched-state.json"} {
		chown(uid, backup, true)
		chown(0, filepath.Join(backup, name), true) // what the restore as root left
		cmd := asNobody()
		cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err == nil || !strings.Contains(stderr.String(), "chown -R") || strings.Contains(stderr.String(), "move it away") ||
			strings.Contains(stderr.String(), "restore it from a backup") {
			t.Errorf("a start as another user than the owner of %q: %v; want an error that says chown, and nothing else to do:\n%s", filepath.Join(backup, name), err, stderr.String())
		}
	}
	chown(uid, backup, true)
	d.api = startCmd(t, asNobody(), apiclient.ReadyPrefix)
	var l struct{ Jobs []struct{ Paused bool } }
	d.do("", "GET", "/api/v1/jobs", "", &l, 200)
	if len(l.Jobs) != 1 || !l.Jobs[0].Paused {
		t.Errorf("the scheduler's jobs on the chowned copy: %+v, want held paused", l.Jobs)
	}
	for _, tenant := range tenants {
		var tk struct{ Status string }
		d.do(tenant, "GET", "/api/v1/tasks/"+ids[tenant], "", &tk, 200)
		var s struct{ Silences []struct{ ID string } }
		d.do(tenant, "GET", "/api/v1/silences", "", &s, 200)
		if tk.Status != "failed" || len(s.Silences) != 1 {
			t.Errorf("tenant %s on the chowned copy: run %s %q, silences %+v; want failed and one", tenant, ids[tenant], tk.Status, s.Silences)
		}
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
}

// A data directory that every local user can read (made by a release
// before the data directory was private, which made it 0755 and the log,
// snapshots and archive 0644; or restored under a permissive umask) kept
// its modes without a word, and with them every tenant's runs open to
// every local user. A start now says so, naming the paths and the command
// that closes them; once closed, or open to the group only (the systemd
// unit's StateDirectoryMode=0750), it says nothing.
func TestOpenDataDirectoryIsTold(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d := newDeployment(t, false, newHook(t), deployOptions{})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.setEventRules()
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	d.api.term(t)
	data := filepath.Join(d.dir, "data")
	segs, _ := filepath.Glob(filepath.Join(data, "wal", "*.wal"))
	// The modes the release before made.
	for _, p := range []string{data, filepath.Join(data, "wal")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range segs {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.start()
	out := d.api.out.String()
	if !strings.Contains(out, "every local user can read the data directory") || !strings.Contains(out, "chmod -R o= "+data) {
		t.Errorf("a start on a data directory others can read did not say so:\n%s", out)
	}
	d.api.term(t)
	if b, err := exec.Command("sh", "-c", "chmod -R o= "+data).CombinedOutput(); err != nil {
		t.Fatalf("the command it gave: %v %s", err, b)
	}
	if err := os.Chmod(data, 0o750); err != nil { // as systemd makes it
		t.Fatal(err)
	}
	d.start()
	if out := d.api.out.String(); strings.Contains(out, "every local user can read") {
		t.Errorf("a start on a closed data directory still says it is open:\n%s", out)
	}
	for _, tenant := range tenants {
		var l struct{ Tasks []struct{ TaskID string } }
		d.do(tenant, "GET", "/api/v1/tasks", "", &l, 200)
		if len(l.Tasks) != 1 {
			t.Errorf("tenant %s after the chmod: %+v, want its one run", tenant, l.Tasks)
		}
	}
}
