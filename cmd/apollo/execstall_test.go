//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// apollo exec reports the end of its command when the command ends, even
// while the reader of its output has stopped reading (a pager, a stuck
// log shipper, a full pipe): the end of the command does not wait for the
// reader. Before, the report waited until the reader took the last of the
// output: for ever with a reader that never did, so a run that succeeded
// stayed running, and a run timed out by --timeout was timed out by the
// server's deadline instead, without its output tails, and apollo exec's
// own report, when it came, was refused. The output is passed on all the
// same: apollo exec exits once the reader has it all.
func TestExecReportsWhileItsOutputWaitsForAReader(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	server := "http://" + addr
	// More than one pipe holds, less than the pipes on the way (the
	// command's, apollo exec's output) and a read between them: the
	// command can end while nobody reads.
	const size = 100_000
	for _, tc := range []struct {
		name, task string
		flags      []string
		script     string
		status     apollo.Status
		code       int
		out        int // bytes passed on, -1: not checked
	}{
		{"ends", "stall-ends", nil, "head -c 100000 /dev/zero; echo done", apollo.StatusSuccess, 0, size + 5},
		{"times out", "stall-timeout", []string{"--timeout", "1s", "--kill-grace", "1m"}, "exec yes", apollo.StatusTimeout, exitTimedOut, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"exec", "--server", server, "--spool", "", "--name", "stall", "--task", tc.task}, tc.flags...)
			cmd := exec.Command(os.Args[0], append(args, "--", "sh", "-c", tc.script)...)
			cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			c, err := apiclient.New(server)
			if err != nil {
				t.Fatal(err)
			}
			// Nothing reads out until the run's end is on the server.
			var tk apollo.Task
			eventually(t, 30*time.Second, tc.task+" reported "+tc.status.String()+" by apollo exec", func() bool {
				tk, err = c.Task(context.Background(), tc.task)
				if err != nil || tk.Status != tc.status {
					return false
				}
				x := lastExtra(t, tk)
				return x["exitCode"] != nil // apollo exec's report, not the server's deadline
			})
			n, err := io.Copy(io.Discard, out)
			if err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			switch {
			case tc.code == 0 && err != nil, tc.code != 0 && (!errors.As(err, &ee) || ee.ExitCode() != tc.code):
				t.Errorf("apollo exec: %v, want exit %d\n%s", err, tc.code, stderr.String())
			}
			if tc.out >= 0 && n != int64(tc.out) {
				t.Errorf("passed on %d bytes of output, want all %d", n, tc.out)
			}
		})
	}
}
