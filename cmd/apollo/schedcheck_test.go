package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/internal/testwait"
)

// A generated jobs file with a mistake repeated in every job (here 50 000
// jobs, each with a timeout that is not a duration) is checked in about
// the time it takes to read, and every problem is listed with its place.
// Before, placing each problem looked through every node of the file, so
// the check took time in the square of the file's size: 34 s for 16 000
// such jobs, minutes for this file, and apollo server --jobs hung as long
// at start.
func TestSchedCheckOfAHugeFileWithAProblemPerJob(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	const n = 50_000
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: job_%d\n    schedule: \"@daily\"\n    command: [\"true\"]\n    timeout: soon\n", i)
	}
	jobs := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(jobs, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "sched", "check", jobs)
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("apollo sched check of %d jobs with a problem each did not end within %v", n, testwait.Timeout(t))
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("apollo sched check: %v, want exit code 1\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines of problems, want %d", len(lines), n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		want := fmt.Sprintf(`%s:%d:14: job "job_%d": timeout: "soon" is not a duration (`, jobs, 5+4*i, i)
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("problem %d:\n got  %s\n want %s...", i, lines[i], want)
		}
	}
}
