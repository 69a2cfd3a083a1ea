//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// These tests run real processes. They wait on output lines, FIFOs and
// process exits, never by sleeping; the timeout test moves a fake clock.

// fetchTask reads a task from a test server, failing the test if it is
// not there.
func fetchTask(t *testing.T, server, id string) apollo.Task {
	t.Helper()
	c, err := apiclient.New(server)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.Task(context.Background(), id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return tk
}

// lastExtra decodes the extra of a task's last record.
func lastExtra(t *testing.T, tk apollo.Task) map[string]any {
	t.Helper()
	if len(tk.History) == 0 {
		t.Fatalf("task %s has no history", tk.TaskID)
	}
	var m map[string]any
	if err := json.Unmarshal(tk.History[len(tk.History)-1].Extra, &m); err != nil {
		t.Fatalf("extra of %s: %v", tk.TaskID, err)
	}
	return m
}

// TestExecTimeoutKillsGroup: the command and the grandchild it started
// both ignore SIGTERM; at the timeout apollo exec sends SIGTERM, after the
// grace SIGKILL, and then neither is left. The grandchild holds a FIFO
// open for writing: the FIFO's reader sees EOF only once it is gone.
func TestExecTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	server := "http://" + addr
	fifo := filepath.Join(t.TempDir(), "grandchild")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opening a FIFO waits for the other end: the reader's open returns
	// once the grandchild has it open for writing. (A reader opened
	// before any writer would read EOF at once.)
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_RDONLY, 0)
		if err != nil {
			t.Error(err)
		}
		opened <- f
	}()

	clk := apollo.NewFakeClock(time.Now())
	script := `trap "" TERM
(echo alive >&3; exec sleep 300) 3>"$1" &
wait`
	var cf clientFlags
	cf.server = server
	rep := openExecReporter(cf, "", "slow-1", "slow", io.Discard)
	r := &execRun{argv: []string{"sh", "-c", script, "sh", fifo}, taskID: "slow-1", name: "slow",
		timeout: time.Minute, grace: 10 * time.Second, clock: clk, signals: make(chan os.Signal),
		stdout: io.Discard, stderr: io.Discard, rep: rep}
	code := make(chan int, 1)
	go func() { code <- r.run() }()

	var rd *os.File
	select {
	case rd = <-opened:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the grandchild never opened the FIFO")
	}
	if rd == nil {
		t.FailNow()
	}
	defer rd.Close()
	alive := make([]byte, 6)
	rd.SetReadDeadline(time.Now().Add(testwait.Timeout(t)))
	if _, err := io.ReadFull(rd, alive); err != nil || string(alive) != "alive\n" {
		t.Fatalf("grandchild did not start: %q %v", alive, err)
	}
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the timeout timer was never armed")
	}
	clk.Advance(time.Minute) // the timeout: SIGTERM, which both ignore
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the kill grace timer was never armed")
	}
	select {
	case c := <-code:
		t.Fatalf("the run ended (exit %d) on SIGTERM, which the command ignores", c)
	default:
	}
	clk.Advance(10 * time.Second) // the grace: SIGKILL to the group
	select {
	case c := <-code:
		if c != exitTimedOut {
			t.Errorf("exit %d, want %d", c, exitTimedOut)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the run did not end after SIGKILL")
	}
	rest, err := io.ReadAll(rd) // EOF: the last writer, the grandchild, is gone
	if err != nil || len(rest) != 0 {
		t.Fatalf("the grandchild is still there: read %q, %v", rest, err)
	}
	rep.close(testwait.Timeout(t))

	tk := fetchTask(t, server, "slow-1")
	extra := lastExtra(t, tk)
	if tk.Status != apollo.StatusTimeout || extra["killed"] != true || extra["signal"] != "SIGKILL" {
		t.Errorf("reported %v with %v, want timeout, killed by SIGKILL", tk.Status, extra)
	}
	// The server's deadline leaves apollo exec time to report the timeout
	// itself, with the output tails, as the scheduler does: the timeout
	// plus the grace was the very moment exec's own report was due, and
	// the server could time the run out first, without them.
	if tk.History[1].TimeoutMs != (75 * time.Second).Milliseconds() {
		t.Errorf("running event's timeoutMs %d, want the timeout, the grace and 5 s for the report", tk.History[1].TimeoutMs)
	}
}

// TestExecForwardsSignals runs apollo exec as its own process and signals
// it, not the command: the signal must reach the command's group.
func TestExecForwardsSignals(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	server := "http://" + addr
	tests := []struct {
		name     string
		sig      syscall.Signal
		script   string
		exit     int
		signaled string // the signal that ended the command, if any
	}{
		// The command traps SIGTERM and exits 42: apollo exec exits 42.
		{"SIGTERM trapped", syscall.SIGTERM, `trap "exit 42" TERM; sleep 300 & echo ready; wait`, 42, ""},
		// SIGINT ends a command that does not trap it: 128+2.
		{"SIGINT", syscall.SIGINT, `echo ready; exec sleep 300`, 130, "SIGINT"},
		{"SIGHUP", syscall.SIGHUP, `echo ready; exec sleep 300`, 129, "SIGHUP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "fwd-" + strings.ReplaceAll(tc.name, " ", "-")
			cmd := exec.Command(os.Args[0], "exec", "--name", "fwd", "--task", id, "--spool", "", "--", "sh", "-c", tc.script)
			cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1", "APOLLO_SERVER="+server)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			ready := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if sc.Text() == "ready" {
						close(ready)
					}
				}
				done <- cmd.Wait()
			}()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("apollo exec ended before the command was ready: %v\n%s", err, stderr.String())
			case <-time.After(testwait.Timeout(t)):
				cmd.Process.Kill()
				t.Fatal("the command never said ready")
			}
			cmd.Process.Signal(tc.sig)
			select {
			case <-done:
			case <-time.After(testwait.Timeout(t)):
				cmd.Process.Kill()
				t.Fatalf("apollo exec did not end after %v", tc.sig)
			}
			if got := cmd.ProcessState.ExitCode(); got != tc.exit {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tc.exit, stderr.String())
			}
			tk := fetchTask(t, server, id)
			extra := lastExtra(t, tk)
			if tk.Status != apollo.StatusFailed || extra["forwardedSignal"] != signalName(tc.sig) {
				t.Errorf("reported %v with %v, want failed with the signal passed on", tk.Status, extra)
			}
			if sig, _ := extra["signal"].(string); sig != tc.signaled {
				t.Errorf("reported the command ended by %q, want %q", sig, tc.signaled)
			}
		})
	}
}

// TestExecLongestTimeout: the longest --timeout plus --kill-grace apollo
// exec takes makes a deadline the server takes (the time for apollo
// exec's own report is cut to fit); one millisecond more is refused before
// anything runs.
func TestExecLongestTimeout(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	server := "http://" + addr
	longest := (maxDeadline - time.Second).String()
	over := (maxDeadline + time.Millisecond - time.Second).String()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"exec", "--server", server, "--spool", "", "--name", "long", "--task", "long-1",
		"--timeout", longest, "--kill-grace", "1s", "--", "true"}, strings.NewReader(""), &out, &errb)
	if code != 0 || errb.Len() > 0 {
		t.Fatalf("--timeout %s: exit %d: %s", longest, code, errb.String())
	}
	tk := fetchTask(t, server, "long-1")
	if tk.Status != apollo.StatusSuccess || tk.History[1].TimeoutMs != apollo.MaxDurationMs {
		t.Fatalf("run %v with timeoutMs %d, want success with %d", tk.Status, tk.History[1].TimeoutMs, int64(apollo.MaxDurationMs))
	}
	errb.Reset()
	code = run(context.Background(), []string{"exec", "--server", server, "--spool", "", "--name", "long", "--task", "long-2",
		"--timeout", over, "--kill-grace", "1s", "--", "true"}, strings.NewReader(""), &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "over the limit") {
		t.Fatalf("--timeout %s: exit %d: %s, want a usage error", over, code, errb.String())
	}
}
