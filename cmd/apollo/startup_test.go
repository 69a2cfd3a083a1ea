package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"

	"github.com/apollo-11/apollo/wal"
)

// startSetup is one start-up of `apollo server`: a configuration, a data
// directory and an address, which a test case breaks and then repairs.
type startSetup struct {
	dir, data, addr string
	args            []string
	closeLater      []io.Closer // what the case holds open while broken
}

func newStartSetup(t *testing.T) *startSetup {
	dir := t.TempDir()
	st := &startSetup{dir: dir, data: filepath.Join(dir, "data"), addr: freeAddr(t)}
	st.args = []string{"server", "--config", st.path("apollo.yaml"), "--data", st.data, "--listen", st.addr}
	st.write(t, "apollo.yaml", "alert:\n  interval: 1s\n")
	return st
}

func (st *startSetup) path(name string) string { return filepath.Join(st.dir, name) }

func (st *startSetup) write(t *testing.T, name, body string) {
	t.Helper()
	p := st.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (st *startSetup) remove(t *testing.T, name string) {
	t.Helper()
	if err := os.RemoveAll(st.path(name)); err != nil {
		t.Fatal(err)
	}
}

func (st *startSetup) release(t *testing.T) {
	t.Helper()
	for _, c := range st.closeLater {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st.closeLater = nil
}

// writeLog appends one record to the data directory's log and, with snap,
// a snapshot at its LSN: both hold bytes no part of the server can read.
func (st *startSetup) writeLog(t *testing.T, snap bool) {
	t.Helper()
	l, err := wal.Open(wal.Options{Dir: filepath.Join(st.data, "wal")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lsn, err := l.Append([]byte{0xee, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(context.Background(), lsn); err != nil {
		t.Fatal(err)
	}
	if snap {
		err := l.WriteSnapshot(lsn, func(w io.Writer) error { _, err := w.Write([]byte("\x03bus\x04junk")); return err })
		if err != nil {
			t.Fatal(err)
		}
	}
}

// damagedSnapshots writes a log of small segments with two snapshots,
// which removes the segments the older one covers, and damages both.
func (st *startSetup) damagedSnapshots(t *testing.T) {
	t.Helper()
	dir := filepath.Join(st.data, "wal")
	l, err := wal.Open(wal.Options{Dir: dir, SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var lsn wal.LSN
	for i := range 100 {
		if lsn, err = l.Append(bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
			t.Fatal(err)
		}
		if i == 49 || i == 99 {
			if err := l.Wait(context.Background(), lsn); err != nil {
				t.Fatal(err)
			}
			if err := l.WriteSnapshot(lsn, func(w io.Writer) error { _, err := w.Write(make([]byte, 64)); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v, want 2", snaps)
	}
	for _, p := range snaps {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xee}, 40); err != nil { // in the body
			t.Fatal(err)
		}
		f.Close()
	}
}

// Every step of start-up that can fail prints the step's error and what
// to do, exits 1 without a stack trace, and closes what the steps before
// it opened: once the cause is repaired, the same process starts on the
// same data directory (the log's lock was released) and the same address
// (the listener was closed). Issue 16.2: a failure after the listener
// was opened used to end in a nil-pointer panic that hid the message.
func TestStartupFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		brk   func(*testing.T, *startSetup)
		fix   func(*testing.T, *startSetup)
		wants []string
	}{
		{
			name:  "data directory",
			brk:   func(t *testing.T, st *startSetup) { st.write(t, "data", "a file, not a directory") },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data") },
			wants: []string{"data directory " + "DIR/data", "not a directory", "choose another --data"},
		},
		{
			name: "log in use",
			brk: func(t *testing.T, st *startSetup) {
				l, err := wal.Open(wal.Options{Dir: filepath.Join(st.data, "wal")})
				if err != nil {
					t.Fatal(err)
				}
				st.closeLater = append(st.closeLater, l)
			},
			fix:   func(t *testing.T, st *startSetup) { st.release(t) },
			wants: []string{"opening the log: wal: DIR/data/wal is in use by another open log", "stop the other apollo process"},
		},
		{
			name:  "archive",
			brk:   func(t *testing.T, st *startSetup) { st.write(t, "data/archive", "a file") },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/archive") },
			wants: []string{"opening the archive", "DIR/data/archive", "not a directory", "move it away"},
		},
		{
			// A directory the server can create but not write in (a
			// restore made as another user): it used to start, and each
			// finished run that left memory was lost, logged as "no
			// longer queryable". Today's and tomorrow's files: a day
			// may begin between the test's clock and the server's.
			name: "archive file",
			brk: func(t *testing.T, st *startSetup) {
				for _, d := range []time.Time{time.Now(), time.Now().Add(24 * time.Hour)} {
					if err := os.MkdirAll(st.path("data/archive/tasks-"+d.UTC().Format("20060102")+".jsonl"), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			},
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/archive") },
			wants: []string{"opening the archive of finished runs", "DIR/data/archive/tasks-", "is a directory", "must be a directory this user can write"},
		},
		{
			name:  "audit log",
			brk:   func(t *testing.T, st *startSetup) { st.write(t, "data/audit", "a file") },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/audit") },
			wants: []string{"opening the audit log", "DIR/data/audit", "not a directory", "move it away"},
		},
		{
			name: "channels",
			brk: func(t *testing.T, st *startSetup) {
				st.write(t, "apollo.yaml", "channels:\n  ops:\n    type: pigeon\n")
			},
			fix:   func(t *testing.T, st *startSetup) { st.write(t, "apollo.yaml", "") },
			wants: []string{"channels:", "pigeon"},
		},
		{
			name: "rules file",
			brk: func(t *testing.T, st *startSetup) {
				st.write(t, "apollo.yaml", "rules: "+st.path("rules.txt")+"\n")
				st.write(t, "rules.txt", `RULE r task_prefix: "a" WINDOW: 5m THRESHOLD: failed_rat > 1`+"\n")
			},
			fix:   func(t *testing.T, st *startSetup) { st.write(t, "rules.txt", "") },
			wants: []string{"rules: ", "DIR/rules.txt:1:", "failed_rat"},
		},
		{
			name: "address in use",
			brk: func(t *testing.T, st *startSetup) {
				ln, err := net.Listen("tcp", st.addr)
				if err != nil {
					t.Fatal(err)
				}
				st.closeLater = append(st.closeLater, ln)
			},
			fix:   func(t *testing.T, st *startSetup) { st.release(t) },
			wants: []string{"listening on 127.0.0.1:", "address already in use", "choose another --listen"},
		},
		{
			name:  "snapshot",
			brk:   func(t *testing.T, st *startSetup) { st.writeLog(t, true) },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/wal") },
			wants: []string{"restoring snapshot at LSN 1:", "move the data directory's newest snapshot away"},
		},
		{
			name:  "log replay",
			brk:   func(t *testing.T, st *startSetup) { st.writeLog(t, false) },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/wal") },
			wants: []string{"replaying the log: bus: replaying record 1:", "restore the data directory from a backup"},
		},
		{
			// Both snapshots damaged, and the segments the older one
			// covered already removed: the log cannot be replayed from
			// its start. It said "this binary cannot apply that record:
			// start the apollo version that wrote the log", which no
			// version could. (The first start sets the damaged snapshots
			// aside: the second finds them missing.)
			name:  "damaged snapshots",
			brk:   func(t *testing.T, st *startSetup) { st.damagedSnapshots(t) },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/wal") },
			wants: []string{"replaying the log: ", "is no longer in the log", "the snapshots that cover the log's first records are damaged or missing", "restore the data directory from a backup"},
		},
		{
			// The file of expectations set through the API shares the
			// rules' format; its hint spoke of rules.
			name:  "expectations saved",
			brk:   func(t *testing.T, st *startSetup) { st.write(t, "data/expectations.json", "{") },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/expectations.json") },
			wants: []string{"expectations saved through the API", "DIR/data/expectations.json", "move it away to start without what the API saved in it"},
		},
		{
			name:  "alert state",
			brk:   func(t *testing.T, st *startSetup) { st.write(t, "data/alerts.json", "{") },
			fix:   func(t *testing.T, st *startSetup) { st.remove(t, "data/alerts.json") },
			wants: []string{"alert", "DIR/data/alerts.json"},
		},
		{
			// The certificate is read before the server says it is up: it
			// once printed "is up" at https://, then failed.
			name: "tls certificate",
			brk: func(t *testing.T, st *startSetup) {
				st.write(t, "apollo.yaml", "tls:\n  cert: "+st.path("cert.pem")+"\n  key: "+st.path("key.pem")+"\n")
			},
			fix: func(t *testing.T, st *startSetup) {
				cert, key := writeSelfSigned(t)
				for from, to := range map[string]string{cert: "cert.pem", key: "key.pem"} {
					b, err := os.ReadFile(from)
					if err != nil {
						t.Fatal(err)
					}
					st.write(t, to, string(b))
				}
			},
			wants: []string{"tls: reading the certificate DIR/cert.pem and its key DIR/key.pem", "no such file or directory", "fix tls.cert and tls.key"},
		},
		{
			name:  "jobs file missing",
			brk:   func(t *testing.T, st *startSetup) { st.args = append(st.args, "--jobs", st.path("jobs.yaml")) },
			fix:   func(t *testing.T, st *startSetup) { st.write(t, "jobs.yaml", "jobs: []\n") },
			wants: []string{"jobs file: ", "DIR/jobs.yaml: no such file or directory", "start without --jobs"},
		},
		{
			name: "jobs file",
			brk: func(t *testing.T, st *startSetup) {
				st.args = append(st.args, "--jobs", st.path("jobs.yaml"))
				st.write(t, "jobs.yaml", "jobs:\n  - nmae: nightly\n")
			},
			fix:   func(t *testing.T, st *startSetup) { st.write(t, "jobs.yaml", "jobs: []\n") },
			wants: []string{"DIR/jobs.yaml:2:5: nmae: unknown field", "start without --jobs"},
		},
		{
			// A run's deadline (timeout + kill_grace) goes out as the
			// events' timeoutMs, which ingest refuses past 366 days: such
			// a file once loaded, and every run's pending and running
			// events were refused (one that overflowed went negative).
			name: "jobs file durations",
			brk: func(t *testing.T, st *startSetup) {
				st.args = append(st.args, "--jobs", st.path("jobs.yaml"))
				st.write(t, "jobs.yaml", "defaults:\n  late_after: 9000h\njobs:\n"+
					"  - name: long\n    schedule: \"@every 1h\"\n    command: [\"true\"]\n    timeout: 9000h\n"+
					"  - name: wraps\n    schedule: \"@every 1h\"\n    command: [\"true\"]\n    timeout: 2562047h\n    kill_grace: 1h\n"+
					"  - name: sum\n    schedule: \"@every 1h\"\n    command: [\"true\"]\n    timeout: 8000h\n    kill_grace: 800h\n")
			},
			fix: func(t *testing.T, st *startSetup) { st.write(t, "jobs.yaml", "jobs: []\n") },
			wants: []string{
				"DIR/jobs.yaml:2:15: late_after: 9000h0m0s is too long (use at most 8760h0m0s (365 days))",
				`DIR/jobs.yaml:7:14: job "long": timeout: 9000h0m0s is too long`,
				`DIR/jobs.yaml:11:14: job "wraps": timeout: 2562047h0m0s is too long`,
				`DIR/jobs.yaml:16:14: job "sum": timeout: timeout plus kill_grace is 8800h0m0s, over 365 days`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStartSetup(t)
			tc.brk(t, st)
			t.Cleanup(func() { st.release(t) })
			// A failed start removes the data directory it created, and
			// leaves one that was there (issue 21).
			_, err := os.Stat(st.data)
			existed := err == nil
			check := func(how string, code int, stderr string) {
				t.Helper()
				if _, err := os.Stat(st.data); (err == nil) != existed {
					t.Errorf("%s: the data directory existed before: %v; after the failed start: %v", how, existed, err == nil)
				}
				if code != 1 {
					t.Errorf("%s: exit %d, want 1", how, code)
				}
				if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
					t.Fatalf("%s: a stack trace instead of the error:\n%s", how, stderr)
				}
				for _, w := range tc.wants {
					if !strings.Contains(stderr, strings.ReplaceAll(w, "DIR", st.dir)) {
						t.Errorf("%s: stderr lacks %q:\n%s", how, w, stderr)
					}
				}
			}
			code, stderr := runBinary(t, st.args...)
			check("the binary", code, stderr)
			code, stderr = runInProcess(t, st.args, nil)
			check("in process", code, stderr)
			tc.fix(t, st)
			up := make(chan struct{})
			if code, stderr := runInProcess(t, st.args, up); code != 0 {
				t.Fatalf("repaired, then in the same process: exit %d:\n%s", code, stderr)
			}
			select {
			case <-up:
			default:
				t.Fatal("repaired: the server never said it was up")
			}
		})
	}
}

// runBinary runs apollo with args to its end and returns its exit code
// and standard error.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	case <-time.After(testwait.Timeout(t)):
		cmd.Process.Kill()
		t.Fatalf("apollo %v still running after 30s:\n%s", args, stderr.String())
		return 0, ""
	}
}

// runInProcess runs the binary's run function with args. With up set, it
// stops the server as soon as it says it is up and closes up.
func runInProcess(t *testing.T, args []string, up chan struct{}) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr syncBuffer
	stdout := io.Discard
	if up != nil {
		stdout = lineWatcher{prefix: apiclient.ReadyPrefix, seen: func() { close(up); cancel() }}
	}
	code := run(ctx, args, strings.NewReader(""), stdout, &stderr)
	return code, stderr.String()
}

// lineWatcher calls seen when a write starts with prefix (the banner is
// written in one call).
type lineWatcher struct {
	prefix string
	seen   func()
}

func (w lineWatcher) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte(w.prefix)) {
		w.seen()
	}
	return len(p), nil
}
