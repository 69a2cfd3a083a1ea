package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// apollo exec of a command that ended within its --timeout but left a
// daemon, in a session of its own, holding its output open: the output
// is read for up to 2 s more, and a timeout that falls in that time is
// not the command's. Before, apollo exec reported it timeout, killed,
// and exited 124 with the command's own exit status (0) lost. The scheduler's runs had this fixed
// (sched.TestExecEndedRunIsNotTimedOutWhileADaemonHoldsItsOutput); apollo
// exec waited on its own. The timeout is moved on a fake clock once the
// command's process has exited.
func TestExecEndedCommandIsNotTimedOutWhileADaemonHoldsItsOutput(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	server := "http://" + addr
	dir := t.TempDir()
	fifos := map[string]string{}
	for _, name := range []string{"leader", "daemon", "go"} {
		fifos[name] = filepath.Join(dir, name)
		if err := syscall.Mkfifo(fifos[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `echo $$ > "$1"; setsid sh -c 'echo $$ > "$1"; exec sleep 60' sh "$2" & read _ < "$3"`
	clk := apollo.NewFakeClock(time.Now())
	var cf clientFlags
	cf.server = server
	rep := openExecReporter(cf, "", "daemon-1", "daemonizes", io.Discard)
	r := &execRun{argv: []string{"sh", "-c", script, "sh", fifos["leader"], fifos["daemon"], fifos["go"]}, taskID: "daemon-1", name: "daemonizes",
		timeout: time.Minute, grace: 10 * time.Second, clock: clk, signals: make(chan os.Signal),
		stdout: io.Discard, stderr: io.Discard, rep: rep}
	code := make(chan int, 1)
	go func() { code <- r.run() }()

	leader := pidFromFIFO(t, fifos["leader"])
	daemon := pidFromFIFO(t, fifos["daemon"])
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the timeout timer was never armed")
	}
	goFile, err := os.OpenFile(fifos["go"], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	goFile.WriteString("go\n")
	goFile.Close()
	eventually(t, 0, "the command's process gone", func() bool { return !processAlive(leader) })
	clk.Advance(time.Minute) // the timeout, while the daemon holds the output
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("apollo exec exits %d, want 0: the command ended before its timeout", c)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the run did not end")
	}
	rep.close(testwait.Timeout(t))
	tk := fetchTask(t, server, "daemon-1")
	extra := lastExtra(t, tk)
	if tk.Status != apollo.StatusSuccess || extra["exitCode"] != 0.0 || extra["killed"] != nil {
		t.Errorf("reported %v with %v, want success, exit code 0", tk.Status, extra)
	}
	if !processAlive(daemon) {
		t.Error("the daemon, in a session of its own, was killed")
	}
}

// apollo exec, run as its own process, of a command that leaves a daemon
// holding its output and exits: the run's duration is the command's, not
// the command's plus the 2 s its output is still read for. Before, every
// such run was reported 2 s longer than it took.
func TestExecDurationEndsWithTheCommand(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	dir := t.TempDir()
	fifos := map[string]string{}
	for _, name := range []string{"daemon", "go"} {
		fifos[name] = filepath.Join(dir, name)
		if err := syscall.Mkfifo(fifos[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t, testwait.Timeout(t))
	// The command waits for "go" once its daemon has left the group: it
	// would otherwise be killed with the group before its setsid.
	cmd := exec.CommandContext(ctx, os.Args[0], "exec", "--server", "http://"+addr, "--spool", "", "--name", "daemonizes", "--task", "quick-1",
		"--", "sh", "-c", `setsid sh -c 'echo $$ > "$1"; exec sleep 60' sh "$1" & read _ < "$2"`, "sh", fifos["daemon"], fifos["go"])
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	before := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	daemon := pidFromFIFO(t, fifos["daemon"])
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	goFile, err := os.OpenFile(fifos["go"], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	goFile.WriteString("go\n")
	goFile.Close()
	ran := time.Since(before) // at least the command's whole run, but its exit
	if err := <-done; err != nil {
		t.Fatalf("apollo exec: %v\n%s", err, out.String())
	}
	tk := fetchTask(t, "http://"+addr, "quick-1")
	extra := lastExtra(t, tk)
	d, _ := extra["durationMs"].(float64)
	if tk.Status != apollo.StatusSuccess || time.Duration(d)*time.Millisecond > ran+time.Second {
		t.Errorf("reported %v with %v, want success and the command's duration (at most %v, plus its exit)", tk.Status, extra, ran)
	}
}

// pidFromFIFO reads a process ID written to the FIFO at path.
func pidFromFIFO(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path) // waits for the writer
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.SetReadDeadline(time.Now().Add(testwait.Timeout(t)))
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q: %v", path, b, err)
	}
	return pid
}
