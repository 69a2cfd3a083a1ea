//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The files the server writes itself in its data directory, each replaced
// by what no server writes there: a link to /dev/zero, or a sparse file of
// gigabytes. Before, each was read whole at start (alerts.json and its live
// mark, a tenant's file in rules/ and expectations/, outbox.jsonl, the scheduler's
// state, a tenant's audit file): under a memory limit of 2 GB the start
// died with 'fatal error: out of memory', or read /dev/zero until killed,
// and named no file. Now the start stops at once with the file's name,
// what is wrong with it and what to do; a tenant's audit file, read a
// line at a time, costs no memory however large, and its lines that do
// not read are skipped with a warning that names it. The copy as the kill
// -9 left it then starts and has what both tenants wrote.
func TestAReplacedStateFileIsNamedAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{jobs: "jobs:\n  - name: held\n    schedule: \"@every 1s\"\n    command: [\"true\"]\n"})
	d.start()
	t.Cleanup(d.logOnFailure)
	d.setEventRules()
	for _, tenant := range tenants {
		d.silence(tenant, `"rule":"`+tenant+`_quiet"`)
		d.putExpectations(tenant, "expectations:\n  - job: "+tenant+"_nightly\n    every: 24h\n")
		d.fail(tenant, tenant+"_kept")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
	d.awaitAlertsSaved("acme_failed", "globex_failed")
	d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)
	d.api.kill()

	data := filepath.Join(d.dir, "data")
	copyData := func(name string) string {
		t.Helper()
		dst := filepath.Join(d.dir, name)
		if out, err := exec.Command("cp", "-a", data, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		return dst
	}
	args := func(dir string) []string {
		a := slices.Clone(d.args)
		a[slices.Index(a, "--data")+1] = dir
		return a
	}
	// under runs the binary under a memory limit of 2 GB and a deadline:
	// what read a file whole before fails, not the machine.
	under := func(ctx context.Context, dir string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v 2000000; exec "$@"`, "sh", os.Args[0]}, args(dir)...)...)
		cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
		return cmd
	}
	const (
		notFile  = "not the regular file the server writes as its "
		tooLarge = "more than the server ever writes in its "
	)
	cases := []struct {
		file, what, remedy string
	}{
		{"alerts.json", "alert state file", "move it away to start with no alert state"},
		{"alerts.live.json", "file of the event rules' place in the log", "move it away: the event rules then hear of none"},
		{savedFile("rules", "acme"), filepath.Base(savedFile("rules", "acme")), "restore it from a backup, or move it away to start without what the API saved in it"},
		{savedFile("expectations", "acme"), filepath.Base(savedFile("expectations", "acme")), "restore it from a backup, or move it away to start without what the API saved in it"},
		{"outbox.jsonl", "outbox", "move the file away to start without the notifications it owes"},
		{"sched/sched-state.json", "scheduler state file", "restore it from a backup, or move it away to start without what it kept"},
		{"audit/tenant-acme.jsonl", "audit file", "move it away to start without the entries it holds"},
	}
	for i, tc := range cases {
		if _, err := os.Stat(filepath.Join(data, tc.file)); err != nil {
			t.Fatalf("the kill -9 left no %s to replace: %v", tc.file, err)
		}
		for _, huge := range []bool{false, true} {
			if huge && strings.HasPrefix(tc.file, "audit/") {
				continue // read a line at a time: below
			}
			dir := copyData(fmt.Sprintf("case%d-%v", i, huge))
			path := filepath.Join(dir, tc.file)
			want := []string{path, notFile + tc.what, tc.remedy}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if huge {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				size, what := int64(8<<30), tooLarge+tc.what
				if tc.file == "outbox.jsonl" { // read a line at a time, to its end: past the memory limit is enough
					size, what = 3<<30, "line 1: longer than 16 MiB, more than the server writes in one line"
				}
				if err := os.Truncate(path, size); err != nil {
					t.Fatal(err)
				}
				want[1] = what
			} else if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			out, err := under(ctx, dir).CombinedOutput()
			cancel()
			for _, w := range want {
				if err == nil || !strings.Contains(string(out), w) {
					t.Errorf("%s replaced (gigabytes: %v): exit %v; want a refusal that says %q:\n%s", tc.file, huge, err, w, out[max(0, len(out)-2000):])
					break
				}
			}
		}
	}

	// A tenant's audit file of 3 GiB, past the memory limit, that ends in no
	// line: read through with
	// the memory of a line, cut (as a crash's torn tail is) and named in a
	// warning; the other tenant's entries are there.
	dir := copyData("audit-huge")
	huge := filepath.Join(dir, "audit", "tenant-acme.jsonl")
	if err := os.Truncate(huge, 3<<30); err != nil {
		t.Fatal(err)
	}
	d.args = args(dir)
	d.api = startCmd(t, under(t.Context(), dir), apiclient.ReadyPrefix)
	if !strings.Contains(d.api.out.String(), "audit: lines of the audit file that do not read as entries were skipped") ||
		!strings.Contains(d.api.out.String(), huge) {
		t.Errorf("no warning naming %s:\n%s", huge, d.api.out)
	}
	var got struct{ Entries []struct{ Action string } }
	d.do("globex", "GET", "/api/v1/audit", "", &got, 200)
	if !slices.ContainsFunc(got.Entries, func(e struct{ Action string }) bool { return e.Action == "silence.add" }) {
		t.Errorf("globex's audit entries after acme's file was replaced: %+v", got.Entries)
	}
	d.api.kill()

	// The copy as the kill left it: what both tenants wrote, read back.
	d.args = args(copyData("pristine"))
	d.start()
	for _, tenant := range tenants {
		var s struct{ Silences []struct{ ID string } }
		d.do(tenant, "GET", "/api/v1/silences", "", &s, 200)
		var r struct{ Rules []struct{ Name string } }
		d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
		var e struct{ Count int }
		d.do(tenant, "GET", "/api/v1/expectations", "", &e, 200)
		if len(s.Silences) != 1 || len(r.Rules) != 1 || r.Rules[0].Name != tenant+"_failed" || e.Count != 1 {
			t.Errorf("tenant %s after kill -9: silences %+v, rules %+v, expectations %d; want one of each", tenant, s.Silences, r.Rules, e.Count)
		}
	}
	var l struct{ Jobs []struct{ Paused bool } }
	d.do("", "GET", "/api/v1/jobs", "", &l, 200)
	if len(l.Jobs) != 1 || !l.Jobs[0].Paused {
		t.Errorf("the scheduler's jobs after kill -9: %+v, want held paused", l.Jobs)
	}
}

// The bus's metrics-writer file, replaced by a link to /dev/zero: the
// start says which file and what to do. Before, the bus read it whole
// and ran out of memory under a limit of 2 GB.
func TestABusWithItsWriterFileReplacedSaysWhich(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	url := redisURL(t)
	_, prefix := redistest.Client(t) // its keys deleted when the test ends
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, writerFile)
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "apollo.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "redis:\n  url: %s\n  prefix: %s\n", url, prefix), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `ulimit -v 2000000; exec "$@"`, "sh", os.Args[0],
		"bus", "--config", cfg, "--data", data, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), path+": is a device, not the regular file the server writes as its metrics writer file") ||
		!strings.Contains(string(out), "put back the ID") {
		t.Fatalf("a bus on a data directory whose %s links to /dev/zero: %v; want a refusal naming it and what to do:\n%s", writerFile, err, out[max(0, len(out)-2000):])
	}
}
