package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/notify/webhook"
)

// The running backup of docs/operations.md ("Backup and restore"), its
// shell lines taken from the doc, run while two tenants report runs: a
// server started on the copy holds every run acknowledged before the copy
// began, and every write made through the API before it, per tenant
// (rules, expectations, silences, a pause of the scheduler). Before, the
// recipe copied the log, the archive, the audit log and alerts.json, and a
// restore lost every rule and expectation set through the API and the
// scheduler's pauses.
func TestRunningBackupRestores(t *testing.T) {
	jobs := "jobs:\n" +
		"  - name: held\n    schedule: \"@every 1s\"\n    command: [\"true\"]\n"
	h := newHook(t)
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	d := newDeployment(t, false, h, deployOptions{jobs: jobs})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })

	rules, expects, silences := map[string]string{}, map[string]string{}, map[string]string{}
	for _, tenant := range tenants {
		rules[tenant] = fmt.Sprintf("RULE %s_failed task_prefix: %q ON: failed NOTIFY: hook\n", tenant, tenant+"_")
		d.do(tenant, "PUT", "/api/v1/rules", rules[tenant], nil, 200)
		expects[tenant] = fmt.Sprintf("expectations:\n  - job: %s_nightly\n    every: 24h\n", tenant)
		d.putExpectations(tenant, expects[tenant])
		silences[tenant] = d.silence(tenant, fmt.Sprintf(`"rule":"%s_failed"`, tenant))
	}
	d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)

	// Runs reported before the copy begins, and more while it runs.
	var before []string
	for i := range 200 {
		tenant := tenants[i%2]
		d.fail(tenant, tenant+"_load")
		before = append(before, fmt.Sprintf("%s_load-%d", tenant, d.seq.Load()))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Off the test goroutine: no d.do, which fails the test.
		for i := 0; !stop.Load(); i++ {
			req, _ := http.NewRequest("POST", "http://"+d.api.addr+"/api/v1/events", strings.NewReader(fmt.Sprintf(
				`{"taskID":"during-%d","sequence":1,"status":"running","ts":%d}`, i, time.Now().UnixMilli())))
			req.Header.Set("Authorization", "Bearer "+d.tokens[tenants[i%2]])
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
	backup := filepath.Join(d.dir, "backup")
	script := "DATA=" + filepath.Join(d.dir, "data") + "\nBACKUP=" + backup + "\n" + runningBackupScript(t)
	out, err := exec.Command("sh", "-e", "-c", script).CombinedOutput()
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("the backup commands of docs/operations.md failed: %v\n%s\n%s", err, script, out)
	}

	// Restore: a server of the same configuration on the copy.
	d.api.kill()
	d.args[slices.Index(d.args, "--data")+1] = backup
	d.start()
	for _, tenant := range tenants {
		var r, x struct{ Source string }
		d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
		d.do(tenant, "GET", "/api/v1/expectations", "", &x, 200)
		var s struct{ Silences []struct{ ID string } }
		d.do(tenant, "GET", "/api/v1/silences", "", &s, 200)
		if r.Source != rules[tenant] || x.Source != expects[tenant] || len(s.Silences) != 1 || s.Silences[0].ID != silences[tenant] {
			t.Errorf("tenant %s after the restore: rules %q, expectations %q, silences %+v; want %q, %q and %s",
				tenant, r.Source, x.Source, s.Silences, rules[tenant], expects[tenant], silences[tenant])
		}
	}
	var l struct {
		Jobs []struct {
			Name   string
			Paused bool
		}
	}
	d.do("", "GET", "/api/v1/jobs", "", &l, 200)
	if len(l.Jobs) != 1 || !l.Jobs[0].Paused {
		t.Errorf("the scheduler's jobs after the restore: %+v, want held paused", l.Jobs)
	}
	for i, id := range before {
		var tk struct{ Status string }
		d.do(tenants[i%2], "GET", "/api/v1/tasks/"+id, "", &tk, 200)
		if tk.Status != "failed" {
			t.Fatalf("run %s after the restore: %q, want failed", id, tk.Status)
		}
	}
}

// runningBackupScript returns the shell lines docs/operations.md gives for
// a backup of a running server, without the lines that set DATA and
// BACKUP.
func runningBackupScript(t *testing.T) string {
	t.Helper()
	f, err := os.Open(exRepoFile(t, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	section, block := false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "**Running:"):
			section = true
		case section && line == "```sh":
			block = true
		case block && line == "```":
			return strings.Join(lines, "\n")
		case block && !strings.HasPrefix(line, "DATA=") && !strings.HasPrefix(line, "BACKUP="):
			lines = append(lines, line)
		}
	}
	t.Fatal(`docs/operations.md: no sh block after "**Running:"`)
	return ""
}

// A backup whose copy of a file written through the API was cut short (a
// cp interrupted, a disk that filled): a server started on it refuses to
// start, names the file and says what to do, and leaves the file as it
// is; with the whole file back, it starts and what both tenants and the
// scheduler's pause wrote acts. Before, a cut sched/sched-state.json was
// logged and ignored: the server started with the job paused through the
// API running again on its schedule, and overwrote the file at once, so
// the pause was gone even once the operator saw the log line.
func TestCutBackupFileRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{jobs: "jobs:\n  - name: held\n    schedule: \"@every 1s\"\n    command: [\"true\"]\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.setEventRules()
	for _, tenant := range tenants {
		d.putExpectations(tenant, "expectations:\n  - job: "+tenant+"_nightly\n    every: 24h\n")
		d.silence(tenant, `"rule":"`+tenant+`_quiet"`)
	}
	d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)
	d.api.term(t)
	backup := filepath.Join(d.dir, "backup")
	if out, err := exec.Command("cp", "-R", filepath.Join(d.dir, "data"), backup).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	d.args[slices.Index(d.args, "--data")+1] = backup
	for _, name := range []string{"alerts.json", savedFile("rules", "acme"), savedFile("expectations", "acme"), "sched/sched-state.json"} {
		path := filepath.Join(backup, name)
		whole, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cut := whole[:len(whole)/2]
		if err := os.WriteFile(path, cut, 0o600); err != nil {
			t.Fatal(err)
		}
		code, stderr := runBinary(t, d.args...)
		if code == 0 || !strings.Contains(stderr, path) || !strings.Contains(stderr, "move it away") {
			t.Errorf("a start with %s cut in half: exit %d; want non-zero, naming the file and what to do:\n%s", name, code, stderr)
		}
		if now, _ := os.ReadFile(path); string(now) != string(cut) {
			t.Errorf("the failed start changed %s: %q, was %q", name, now, cut)
		}
		if err := os.WriteFile(path, whole, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d.start()
	var l struct {
		Jobs []struct {
			Name   string
			Paused bool
		}
	}
	d.do("", "GET", "/api/v1/jobs", "", &l, 200)
	if len(l.Jobs) != 1 || !l.Jobs[0].Paused {
		t.Errorf("the scheduler's jobs on the whole copy: %+v, want held paused", l.Jobs)
	}
	for _, tenant := range tenants {
		if got := d.expectationsOf(tenant); !strings.Contains(got, tenant+"_nightly") {
			t.Errorf("tenant %s: expectations on the whole copy %q", tenant, got)
		}
		var s struct{ Silences []struct{ ID string } }
		d.do(tenant, "GET", "/api/v1/silences", "", &s, 200)
		if len(s.Silences) != 1 {
			t.Errorf("tenant %s: silences on the whole copy %+v, want one", tenant, s.Silences)
		}
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
}

// The stopped backup of docs/operations.md, its commands taken from the
// page, of a server that owed each tenant's notification (the webhook was
// down) when it stopped: a server started on the restored copy sends each
// once, not never and not twice, and both tenants' rules and the pause act.
func TestStoppedBackupSendsWhatItOwedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	var script string
	for _, b := range mdBlocks(t, "docs/operations.md", "## Backup and restore", "sh") {
		if strings.Contains(b, "systemctl stop apollo") {
			script = b
		}
	}
	if script == "" {
		t.Fatal("no block with systemctl stop apollo under ## Backup and restore")
	}
	h, down, refused := downHook(t)
	d := newDeployment(t, false, h, deployOptions{repeat: "1h",
		jobs: "jobs:\n  - name: held\n    schedule: \"@every 1s\"\n    command: [\"true\"]\n"})
	d.start()
	t.Cleanup(d.logOnFailure)
	d.do("", "PUT", "/api/v1/rules", "RULE sentinel_failed task_prefix: \"sentinel_\" ON: failed NOTIFY: hook\n", nil, 200)
	d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)
	want := owedWhileDown(t, d, refused, func() int64 {
		var sys struct {
			Notifications struct {
				Channels map[string]struct{ Queued int64 }
			}
		}
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Notifications.Channels["hook"].Queued
	})

	// systemctl stop; the copy; then the restore: the copy in place of the
	// data directory, and systemctl start.
	d.api.term(t)
	archive := filepath.Join(d.dir, "backup.tar.gz")
	var lines []string
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, "systemctl ") {
			continue
		}
		lines = append(lines, strings.NewReplacer("-C /var/lib", "-C "+d.dir, " apollo", " data",
			"/backup/apollo-$(date +%Y%m%dT%H%M%S).tar.gz", archive).Replace(line))
	}
	runSnippet(t, "", strings.Join(lines, "\n"))
	if err := os.RemoveAll(filepath.Join(d.dir, "data")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", d.dir, "-xzf", archive).CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v %s", err, out)
	}
	down.Store(false)
	d.start()
	awaitTenants(t, h, "firing", want)
	// Anything owed twice was queued at the start, before this one.
	d.fail("", "sentinel_x")
	for {
		p := h.await(t, 30*time.Second, "the default tenant's sentinel", func(webhook.ApolloPayload) bool { return true })
		if p.Alert.Rule == "sentinel_failed" {
			break
		}
		t.Errorf("a second notification after the restore: tenant %q, rule %s, %s", p.Alert.Tenant, p.Alert.Rule, p.Kind)
	}
	var l struct{ Jobs []struct{ Paused bool } }
	d.do("", "GET", "/api/v1/jobs", "", &l, 200)
	if len(l.Jobs) != 1 || !l.Jobs[0].Paused {
		t.Errorf("the scheduler's jobs after the restore: %+v, want held paused", l.Jobs)
	}
}
