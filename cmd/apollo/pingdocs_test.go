package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// The cron one-liner of README.md, README.zh-CN.md and docs/protocol.md, as
// printed, run by sh as cron runs it: a job that exits 3 is recorded as a
// failed run with its exit code, one that exits 0 as a success (issue 15.9:
// the README's `start && job && ping` left a failed run running).
func TestCronPingLine(t *testing.T) {
	t.Parallel()
	sh := exTool(t, "sh")
	exTool(t, "curl")
	addr := exServer(t, "", nil)
	for i, src := range []struct{ file, heading string }{
		{"README.md", "## Report from anywhere"},
		{"README.zh-CN.md", "### 用 curl"},
		{"docs/protocol.md", "## Pings"},
	} {
		var lines []string
		for _, b := range mdBlocks(t, src.file, src.heading, "sh") {
			for _, l := range strings.Split(b, "\n") {
				if strings.Contains(l, "/ping/") {
					lines = append(lines, l)
				}
			}
		}
		if len(lines) != 1 {
			t.Fatalf("%s: %d ping lines under %q, want 1: %q", src.file, len(lines), src.heading, lines)
		}
		for _, code := range []int{3, 0} {
			job := fmt.Sprintf("cron_%d_%d", i, code)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "backup.sh"), []byte(fmt.Sprintf("#!/bin/sh\nexit %d\n", code)), 0o755); err != nil {
				t.Fatal(err)
			}
			line := strings.NewReplacer("127.0.0.1:1969", addr, "nightly_backup", job).Replace(lines[0])
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			cmd := exec.CommandContext(ctx, sh, "-c", line)
			cmd.Dir, cmd.Env = dir, exEnv()
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("%s: %s: %v\n%s", src.file, line, err, out)
			}
			runs := exList(t, addr, job+"@ping-")
			if len(runs) != 1 {
				t.Fatalf("%s, exit %d: runs %+v", src.file, code, runs)
			}
			want, history := apollo.StatusFailed, "running/1 failed/2"
			if code == 0 {
				want, history = apollo.StatusSuccess, "running/1 success/2"
			}
			run := exCheckRun(t, addr, runs[0].TaskID, job, want, history)
			if x := string(run.History[len(run.History)-1].Extra); !strings.Contains(x, fmt.Sprintf(`"exitCode":%d`, code)) {
				t.Errorf("%s, exit %d: the end's extra %s", src.file, code, x)
			}
		}
	}
}
