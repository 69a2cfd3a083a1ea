package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A run of tenant a is lost (apollo sched killed -9 mid-run) and the
// scheduler now starts with tenant b's token, a's token gone: apollo sched
// lost lists the run, with the token it was reported with; refuses while
// a scheduler runs on the directory; --drop of a task the file does not
// keep changes nothing; after the run is fixed on the server, --drop takes
// it out, and the next start with b's token no longer logs it. Before, the
// only way was to edit the state file by hand.
func TestSchedLostListsAndDropsAnotherTokensRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	o := newOwnedScheds(t)
	task, _ := o.killedMidRun(t)
	state := o.stateDir()

	code, out, errOut := execApollo(t, "sched", "lost", "--state", state, "--token", o.secrets["b"])
	if code != 0 || !strings.Contains(out, task) || !strings.Contains(out, "owned_job") || !strings.Contains(out, "(another token)") {
		t.Fatalf("apollo sched lost with b's token: exit %d\n%s%s\nwant %s listed, reported with another token", code, out, errOut, task)
	}
	if code, out, _ := execApollo(t, "sched", "lost", "--state", state, "--token", o.secrets["a"]); code != 0 || !strings.Contains(out, "(this token)") {
		t.Errorf("apollo sched lost with a's token: exit %d\n%s\nwant the run reported with this token", code, out)
	}

	running := o.sched("b")
	code, _, errOut = execApollo(t, "sched", "lost", "--state", state, "--drop", task)
	if code != 1 || !strings.Contains(errOut, "in use by a running scheduler") {
		t.Errorf("apollo sched lost --drop while a scheduler runs: exit %d, %q; want 1 and refused", code, errOut)
	}
	running.term(t)
	// The log line names the commands that exist (it said "apollo fix",
	// which is "apollo task fix", and to edit the state file by hand).
	if out := running.out.String(); !strings.Contains(out, "reported with another token") ||
		!strings.Contains(out, "apollo task fix TASK") || !strings.Contains(out, "apollo sched lost --state") {
		t.Fatalf("the scheduler with b's token does not log a's run, and the commands to use:\n%s", out)
	}

	code, _, errOut = execApollo(t, "sched", "lost", "--state", state, "--drop", task, "--drop", "no_such@x#1")
	if code != 1 || !strings.Contains(errOut, `"no_such@x#1"`) || !strings.Contains(errOut, "nothing was dropped") {
		t.Errorf("--drop of a task not kept: exit %d, %q; want 1 naming it", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "sched-state.json")); !strings.Contains(string(b), task) {
		t.Fatalf("a --drop refused took %s out of the state file:\n%s", task, b)
	}

	// What docs/scheduler.md says to do: mark it on the server with a
	// token of its tenant, then drop it.
	if code, out, errOut := execApollo(t, "task", "fix", task, "--status", "failed", "--reason", "its scheduler's token is gone",
		"--server", "http://"+o.srv.addr, "--token", o.secrets["a"]); code != 0 {
		t.Fatalf("apollo task fix: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = execApollo(t, "sched", "lost", "--state", state, "--drop", task)
	if code != 0 || !strings.Contains(out, "dropped "+task) {
		t.Fatalf("apollo sched lost --drop: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := execApollo(t, "sched", "lost", "--state", state); code != 0 || !strings.Contains(out, "no runs kept") {
		t.Errorf("apollo sched lost after the drop: exit %d\n%s", code, out)
	}
	again := o.sched("b")
	again.term(t)
	if out := again.out.String(); strings.Contains(out, "reported with another token") {
		t.Errorf("a start after the drop still logs a's run:\n%s", out)
	}
	if _, tk := o.taskOf("a", task); tk.Status != apollo.StatusFailed {
		t.Errorf("a's run is %s, want failed as fixed", tk.Status)
	}
	if code, _ := o.taskOf("b", task); code != 404 {
		t.Errorf("a's run is in b's tenant: %d", code)
	}

	if code, _, errOut := execApollo(t, "sched", "lost", "--state", filepath.Join(o.dir, "no-such-state")); code != 1 || !strings.Contains(errOut, "no state directory") {
		t.Errorf("apollo sched lost of a state directory that does not exist: exit %d, %q", code, errOut)
	}
}

// execApollo runs the binary with args to its end, with a clean token
// environment: its exit code, standard output and standard error.
func execApollo(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1", "APOLLO_TOKEN=", "XDG_CONFIG_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("apollo %v did not end within %v", args, testwait.Timeout(t))
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}
