package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// smallDiskScript mounts a tmpfs of $2 KiB on $1 in a mount namespace of
// its own (so nothing outside sees it, and it goes when the process does),
// fills all but $3 KiB of it, and runs the rest of the arguments there.
const smallDiskScript = `set -e
mount -t tmpfs -o size="$2"k tmpfs "$1"
head -c $(( ($2 - $3) * 1024 )) /dev/zero > "$1/ballast"
shift 3
exec "$@"`

// smallDisk returns the command that runs `apollo args...` with a data
// directory on a tmpfs of sizeKiB with freeKiB left, or skips the test
// where a mount namespace cannot be had (not root, no user namespaces).
func smallDisk(t *testing.T, sizeKiB, freeKiB int, args ...string) (*exec.Cmd, string) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1) to mount a small filesystem")
	}
	data := t.TempDir()
	probe := exec.Command(unshare, "--mount", "--map-root-user", "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$1"`, "sh", data)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs in a mount namespace here (%v: %s)", err, out)
	}
	cmdArgs := append([]string{"--mount", "--map-root-user", "sh", "-c", smallDiskScript, "sh",
		data, fmt.Sprint(sizeKiB), fmt.Sprint(freeKiB), os.Args[0]}, args...)
	return exec.Command(unshare, cmdArgs...), data
}

// TestFullDiskStopsAuditBeforeTheLog is issue 16.3 on a real small disk:
// callers with a wrong token send requests with 60 KB paths to a server
// whose data disk is nearly full. The audit file neither grows with them
// nor takes the last free space: events are still stored afterwards, the
// failures are counted in one entry, and the server says the audit file
// is held back to keep the disk for the write-ahead log.
func TestFullDiskStopsAuditBeforeTheLog(t *testing.T) {
	t.Parallel()
	secret, tok, err := httpapi.NewToken("ops", httpapi.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "apollo.yaml")
	cfg := fmt.Sprintf("auth:\n  tokens:\n    - {name: ops, role: admin, sha256: %x}\n", tok.Hash)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// 8 MiB with 512 KiB free: under the audit file's reserve (a tenth of
	// the disk), above what the events of this test need.
	cmd, data := smallDisk(t, 8<<10, 512, "server", "--config", cfgFile, "--listen", "127.0.0.1:0")
	cmd.Args = append(cmd.Args, "--data", data)
	srv := startCmd(t, cmd, apiclient.ReadyPrefix)
	base := "http://" + srv.addr

	fail := func(format string, args ...any) {
		t.Helper()
		srv.kill() // its output is complete once it has exited
		t.Fatalf(format+"\nserver output:\n%s", append(args, srv.out)...)
	}
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fail("%s %.60s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	const flood = 400 // 24 MB of paths: three times the disk
	long := "/api/v1/tasks/" + strings.Repeat("x", 60<<10)
	floodStart := time.Now()
	for i := range flood {
		if st, body := do("GET", long, "apl_notatoken", ""); st != 401 {
			fail("failed request %d answered %d %s", i, st, body)
		}
	}
	// More than a page of log: a log that still had room in the page it
	// was writing would not notice a full disk.
	var evs []string
	for i := range 200 {
		evs = append(evs, fmt.Sprintf(`{"taskID":"after-flood-%d","name":"disk","sequence":1,"status":"running","ts":%d,"extra":{"note":%q}}`,
			i, time.Now().UnixMilli(), strings.Repeat("n", 200)))
	}
	if st, body := do("POST", "/api/v1/events", secret, "["+strings.Join(evs, ",")+"]"); st != 200 || !strings.Contains(body, fmt.Sprintf(`"accepted":%d,`, len(evs))) {
		fail("events after the flood: %d %s", st, body)
	}
	if st, body := do("POST", "/api/v1/tasks/after-flood-0/status", secret, `{"status":"failed","reason":"checked on a full disk"}`); st != 200 {
		fail("correction: %d %s", st, body)
	}

	st, body := do("GET", "/api/v1/audit", secret, "")
	var list struct{ Entries []audit.Entry }
	if err := json.Unmarshal([]byte(body), &list); st != 200 || err != nil {
		fail("audit: %d %s", st, body)
	}
	// Failures are aggregated per source and minute: one entry per minute
	// the flood spanned (one, unless it crossed a minute's end), the
	// counts adding up to the flood.
	minutes := int(time.Now().Truncate(time.Minute).Sub(floodStart.Truncate(time.Minute))/time.Minute) + 1
	var actions []string
	failures, failEntries := 0, 0
	for i, e := range list.Entries {
		actions = append(actions, fmt.Sprintf("%s×%d", e.Action, max(e.Count, 1)))
		if i > 0 && e.Action == "auth.fail" {
			failures += max(e.Count, 1)
			failEntries++
		}
	}
	if len(actions) == 0 || actions[0] != "task.correct×1" || failEntries != len(actions)-1 ||
		failures != flood || failEntries > minutes {
		t.Errorf("the audit list is %q, want task.correct×1 then at most %d auth.fail entries adding up to %d", strings.Join(actions, " "), minutes, flood)
	}
	srv.kill()
	for _, want := range []string{"audit: entries are not written to the audit file", "kept for the write-ahead log"} {
		if !strings.Contains(srv.out.String(), want) {
			t.Errorf("the server does not say %q:\n%s", want, srv.out)
		}
	}
}

// Rules and expectations that cannot be saved (here: the data disk is
// full) are refused as unavailable, saying that nothing changed and to try
// again, as a silence, an ack or a pause that cannot be saved is; what was
// in force before stays in force and shown, per tenant, and the server
// keeps answering. They were answered 500 "internal error", which said
// neither whether the rules had changed nor what to do.
func TestSavesOnAFullDiskAreRefusedAsUnavailable(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString("channels:\n  hook:\n    type: webhook\n    url: http://127.0.0.1:9/\n    tenants: [\"*\"]\nauth:\n  tokens:\n")
	for _, tenant := range tenants {
		secret, tok, err := httpapi.NewToken(tenant, httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		tokens[tenant] = secret
		fmt.Fprintf(&cfg, "    - {name: %s, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	cfgFile := filepath.Join(t.TempDir(), "apollo.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// 8 MiB with 1.4 MiB free: a file with 3 MiB of comments cannot be
	// written, one of a few lines can.
	cmd, data := smallDisk(t, 8<<10, 1400, "server", "--config", cfgFile, "--listen", "127.0.0.1:0")
	cmd.Args = append(cmd.Args, "--data", data)
	srv := startCmd(t, cmd, apiclient.ReadyPrefix)
	t.Cleanup(srv.kill)
	do := func(tenant, method, path, ctype, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+srv.addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens[tenant])
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", method, path, tenant, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	padding := strings.Repeat("# "+strings.Repeat("p", 62)+"\n", 3<<14) // 3 MiB
	files := []struct{ path, ctype, small string }{
		{"/api/v1/rules", "text/plain", "RULE %s_failed task_prefix: %q ON: failed NOTIFY: hook\n"},
		{"/api/v1/expectations", "application/yaml", "expectations:\n  - job: %s_nightly\n    every: 24h\n# %s\n"},
	}
	for _, f := range files {
		for _, tenant := range tenants {
			src := fmt.Sprintf(f.small, tenant, tenant+"_")
			if st, body := do(tenant, "PUT", f.path, f.ctype, src); st != http.StatusOK {
				t.Fatalf("PUT %s as %s: %d %s", f.path, tenant, st, body)
			}
			st, body := do(tenant, "PUT", f.path, f.ctype, padding+src)
			var e apiclient.ErrorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil {
				t.Fatalf("PUT %s of 3 MiB as %s on a full disk: %d %.300s", f.path, tenant, st, body)
			}
			if st != http.StatusServiceUnavailable || e.Error.Code != "unavailable" ||
				!strings.Contains(e.Error.Message, "could not be saved") || !strings.Contains(e.Error.Hint, "nothing changed") {
				t.Errorf("PUT %s of 3 MiB as %s on a full disk: %d %.300s, want 503 unavailable: could not be saved, nothing changed", f.path, tenant, st, body)
			}
			var got struct{ Source string }
			st, body = do(tenant, "GET", f.path, "", "")
			if err := json.Unmarshal([]byte(body), &got); err != nil || st != http.StatusOK || got.Source != src {
				t.Errorf("GET %s as %s after the refused PUT: %d %.300s, want the source %q", f.path, tenant, st, body, src)
			}
		}
	}
	if !strings.Contains(srv.out.String(), "no space left on device") {
		t.Errorf("the server log does not say why:\n%s", srv.out)
	}
}

// stopOnSmallDiskScript is smallDiskScript for a server that is stopped
// with SIGTERM (sent on to it) and whose data directory is wanted after:
// once it has exited, the shell copies the directory (without the
// ballast) to $4 before the tmpfs goes, and exits with its exit code.
const stopOnSmallDiskScript = `mount -t tmpfs -o size="$2"k tmpfs "$1" || exit 99
head -c $(( ($2 - $3) * 1024 )) /dev/zero > "$1/ballast"
dir=$1
out=$4
shift 4
"$@" &
pid=$!
trap 'kill -TERM $pid' TERM
wait $pid
code=$?
while kill -0 $pid 2>/dev/null; do wait $pid; code=$?; done
rm -f "$dir/ballast" "$dir/filler"
cp -a "$dir"/. "$out"/ || exit 98
exit $code`

// A final snapshot that a full disk refuses loses nothing (the log holds
// every accepted event and the next start replays it), so the stop is
// still clean: exit 0, as `apollo server --help` and docs/operations.md
// say. It exited 1, which a supervisor reads as a crash.
func TestFinalSnapshotOnAFullDiskStopsCleanly(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1) to mount a small filesystem")
	}
	mnt, kept := t.TempDir(), t.TempDir()
	probe := exec.Command(unshare, "--mount", "--map-root-user", "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$1"`, "sh", mnt)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs in a mount namespace here (%v: %s)", err, out)
	}
	cmd := exec.Command(unshare, "--mount", "--map-root-user", "sh", "-c", stopOnSmallDiskScript, "sh",
		mnt, fmt.Sprint(8<<10), "2048", kept,
		os.Args[0], "server", "--data", mnt, "--listen", "127.0.0.1:0")
	srv := startCmd(t, cmd, apiclient.ReadyPrefix)
	now := time.Now().UnixMilli()
	var body strings.Builder
	body.WriteByte('[')
	for i := range 50 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"taskID":"t%d","sequence":1,"status":"running","ts":%d}`, i, now)
	}
	body.WriteByte(']')
	for _, r := range postEvents(t, srv.addr, body.String()).Results {
		if r.Result != "accepted" {
			t.Fatalf("event not accepted: %+v", r)
		}
	}
	// Take the rest of the disk through the shell's view of its mount
	// namespace: the final snapshot finds no room.
	f, err := os.Create(fmt.Sprintf("/proc/%d/root%s/filler", srv.cmd.Process.Pid, mnt))
	if err != nil {
		t.Skipf("cannot reach the small disk from outside its mount namespace: %v", err)
	}
	zeros := make([]byte, 64<<10)
	for {
		if _, err := f.Write(zeros); err != nil {
			break
		}
	}
	f.Close()
	srv.term(t)
	if !strings.Contains(srv.out.String(), "final snapshot failed") {
		t.Fatalf("the final snapshot did not fail, the test proves nothing:\n%s", srv.out)
	}
	again := startApollo(t, "server", "--data", kept, "--listen", "127.0.0.1:0")
	var page struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if code := getJSON(t, "http://"+again.addr+"/api/v1/tasks?limit=100", &page); code != 200 || len(page.Tasks) != 50 {
		t.Fatalf("after the restart: HTTP %d, %d tasks, want the 50 accepted\n%s", code, len(page.Tasks), again.out)
	}
}

// A write-ahead log that fails (here: the disk fills while events come)
// stops the server: the request that met the failure is answered 503
// "could not be made durable", and the process exits 1 saying to
// restart, so that recovery keeps only what is on disk (docs/operations.md,
// "Disk full"; the page said appends were refused until a restart, with
// the process left running).
func TestAFailedLogStopsTheServer(t *testing.T) {
	t.Parallel()
	// 4 MiB with 1.5 MiB free: room for the log's first segment and its
	// runway, not for what the events below write.
	cmd, data := smallDisk(t, 4<<10, 1536, "server", "--listen", "127.0.0.1:0")
	cmd.Args = append(cmd.Args, "--data", data)
	srv := startCmd(t, cmd, apiclient.ReadyPrefix)
	note := strings.Repeat("n", 3000)
	var last string
	for i := 0; ; i++ {
		if i == 2000 { // 6 MB of events: past the disk
			srv.kill()
			t.Fatalf("the disk never filled; last answer %s\n%s", last, srv.out)
		}
		body := fmt.Sprintf(`{"taskID":"fill-%d","sequence":1,"status":"running","ts":%d,"extra":{"note":%q}}`, i, time.Now().UnixMilli(), note)
		resp, err := http.Post("http://"+srv.addr+"/api/v1/events", "application/json", strings.NewReader(body))
		if err != nil {
			break // the server stopped between two requests
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		if resp.StatusCode != 200 {
			if resp.StatusCode != 503 || !strings.Contains(string(b), "the events could not be made durable") {
				t.Errorf("the event that met the full disk: %s, want 503 could not be made durable", last)
			}
			break
		}
	}
	select {
	case <-srv.exited:
	case <-time.After(testwait.Timeout(t)):
		srv.kill()
		t.Fatalf("the server runs on after its log failed (last answer %s)\n%s", last, srv.out)
	}
	var exit *exec.ExitError
	if !errors.As(srv.waitErr, &exit) || exit.ExitCode() != 1 ||
		!strings.Contains(srv.out.String(), "apollo: the write-ahead log failed (") || !strings.Contains(srv.out.String(), "restart to recover what is on disk") {
		t.Errorf("after its log failed the server exited %v, want 1 with what to do:\n%s", srv.waitErr, srv.out)
	}
}
