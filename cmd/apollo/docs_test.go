package main

// The shell and Python snippets of the docs, as printed there, run against
// a real server: a reader who pastes them gets what the page says.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// mdBlocks returns the fenced code blocks of a markdown file whose info
// string is lang and that follow the heading, up to the next heading of
// the same or a higher level.
func mdBlocks(t *testing.T, file, heading, lang string) []string {
	t.Helper()
	src, err := os.ReadFile(exRepoFile(t, file))
	if err != nil {
		t.Fatal(err)
	}
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	var blocks []string
	in, fence := false, false
	var cur []string
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case fence:
			if strings.HasPrefix(line, "```") {
				fence = false
				blocks = append(blocks, strings.Join(cur, "\n"))
			} else {
				cur = append(cur, line)
			}
		case strings.HasPrefix(line, "#"):
			l := strings.IndexFunc(line, func(r rune) bool { return r != '#' })
			if in && l <= level {
				return blocks
			}
			in = in || line == heading
		case in && line == "```"+lang:
			fence, cur = true, nil
		}
	}
	if !in {
		t.Fatalf("%s: no heading %q", file, heading)
	}
	return blocks
}

// runSnippet runs a shell snippet from the docs, pointed at addr instead of
// the default address.
func runSnippet(t *testing.T, addr, snippet string) string {
	t.Helper()
	return runSnippetEnv(t, addr, snippet, exEnv())
}

// runSnippetPortably is runSnippet with the date of the BSDs and macOS
// on the PATH: a snippet a reader pastes on a Mac must work there too.
func runSnippetPortably(t *testing.T, addr, snippet string) string {
	t.Helper()
	return runSnippetEnv(t, addr, snippet, append(exEnv(), "PATH="+bsdDateDir(t)+string(os.PathListSeparator)+os.Getenv("PATH")))
}

// bsdDateDir returns a directory whose date behaves as the BSDs' and
// macOS's: it has no %N (nanoseconds, GNU's), and prints what follows the
// % as it is, so that date +%s%3N prints "17644000003N".
func bsdDateDir(t *testing.T) string {
	t.Helper()
	real := exTool(t, "date")
	dir := t.TempDir()
	shim := "#!/bin/sh\nn=$#\nwhile [ $n -gt 0 ]; do\n\ta=$1; shift; n=$((n - 1))\n" +
		"\tset -- \"$@\" \"$(printf '%s' \"$a\" | sed 's/%\\([0-9]*\\)N/\\1N/g')\"\ndone\nexec " + strconv.Quote(real) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "date"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runSnippetEnv(t *testing.T, addr, snippet string, env []string) string {
	t.Helper()
	sh := exTool(t, "sh")
	exTool(t, "curl")
	snippet = strings.ReplaceAll(snippet, "127.0.0.1:1969", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, "-eu", "-c", snippet)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\noutput:\n%s", err, snippet, out)
	}
	return string(out)
}

// The curl example of docs/protocol.md, as printed there.
func TestProtocolCurlExample(t *testing.T) {
	t.Parallel()
	blocks := mdBlocks(t, "docs/protocol.md", "### From the shell", "sh")
	if len(blocks) != 1 {
		t.Fatalf("%d sh blocks under the heading, want 1", len(blocks))
	}
	addr := exServer(t, "", nil)
	out := runSnippetPortably(t, addr, blocks[0])
	if !strings.Contains(out, `"accepted":1`) {
		t.Errorf("answer %s", out)
	}
	page := exList(t, addr, "backup-")
	if len(page) != 1 {
		t.Fatalf("tasks %+v", page)
	}
	if id := page[0].TaskID; !strings.HasPrefix(id, "backup-2") || len(id) != len("backup-20261129") {
		t.Errorf("task ID %q, want backup-<yyyymmdd>", id)
	}
	exCheckRun(t, addr, page[0].TaskID, "nightly_backup", apollo.StatusRunning, "running/1")
}

// The quick start in Chinese: its curl block reports one run, running then
// success, and its Python block wraps a block as one run.
func TestReadmeZhCNExamples(t *testing.T) {
	t.Parallel()
	blocks := mdBlocks(t, "README.zh-CN.md", "### 用 curl", "sh")
	if len(blocks) < 1 || !strings.Contains(blocks[0], "/api/v1/events") {
		t.Fatalf("blocks under ### 用 curl: %q", blocks)
	}
	addr := exServer(t, "", nil)
	out := runSnippetPortably(t, addr, blocks[0])
	if strings.Count(out, `"accepted":1`) != 2 {
		t.Errorf("answers %s", out)
	}
	page := exList(t, addr, "backup-")
	if len(page) != 1 {
		t.Fatalf("tasks %+v", page)
	}
	exCheckRun(t, addr, page[0].TaskID, "nightly_backup", apollo.StatusSuccess, "running/1 success/2")

	py := mdBlocks(t, "README.zh-CN.md", "### 用 Python", "python")
	if len(py) != 1 {
		t.Fatalf("python blocks: %d", len(py))
	}
	python := exTool(t, "python3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", strings.ReplaceAll(py[0], "127.0.0.1:1969", addr))
	cmd.Env = append(exEnv(), "PYTHONPATH="+filepath.Dir(exRepoFile(t, "examples/python/apollo_report.py")))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	runs := exList(t, addr, "nightly_backup@py-")
	if len(runs) != 1 {
		t.Fatalf("python runs %+v", runs)
	}
	exCheckRun(t, addr, runs[0].TaskID, "nightly_backup", apollo.StatusSuccess, "running/1 success/2")
}

// exList lists the tasks whose job name or task ID starts with prefix.
func exList(t *testing.T, addr, prefix string) []apollo.Task {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/tasks?prefix=" + prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Tasks []apollo.Task }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return page.Tasks
}

// Every relative link in the README files and docs/ points at a file or
// directory that exists: a renamed or missing page shows here, not in a
// reader's browser.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root := filepath.Dir(exRepoFile(t, "README.md"))
	files := []string{"README.md", "README.zh-CN.md", "bench/README.md", "bench/drills/README.md", "examples/README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		var prose strings.Builder // without fenced code: templates there look like links
		fence := false
		for line := range strings.Lines(string(src)) {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			} else if !fence {
				prose.WriteString(line)
			}
		}
		for _, m := range link.FindAllStringSubmatch(prose.String(), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(f), filepath.FromSlash(target))); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, m[1])
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: the pattern is broken", checked)
	}
}

// The README's "Report from anywhere" block, run whole by sh as printed
// (the address aside): the curl POST, the cron ping line and apollo exec
// each leave the run they promise. ./backup.sh and apollo are on hand as a
// reader's would be: a script that succeeds, and this binary.
func TestReadmeReportFromAnywhere(t *testing.T) {
	t.Parallel()
	blocks := mdBlocks(t, "README.md", "## Report from anywhere", "sh")
	if len(blocks) != 1 {
		t.Fatalf("%d sh blocks under the heading, want 1", len(blocks))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nAPOLLO_TEST_MAIN=1 exec %s \"$@\"\n", strconv.Quote(exe))
	for name, body := range map[string]string{"apollo": wrapper, "backup.sh": "#!/bin/sh\necho backed up\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr := exServer(t, "", nil)
	sh := exTool(t, "sh")
	exTool(t, "curl")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, "-eu", "-c", strings.ReplaceAll(blocks[0], "127.0.0.1:1969", addr))
	cmd.Dir = dir
	// With the BSDs' and macOS's date too: the block must work on a Mac.
	cmd.Env = append(exEnv(), "PATH="+dir+string(os.PathListSeparator)+bsdDateDir(t)+string(os.PathListSeparator)+os.Getenv("PATH"), "APOLLO_SERVER=http://"+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	if !strings.Contains(string(out), `"accepted":1`) {
		t.Errorf("the curl POST's answer is missing from:\n%s", out)
	}
	exCheckRun(t, addr, "backup-20261129", "nightly_backup", apollo.StatusRunning, "running/1")
	pings := exList(t, addr, "nightly_backup@ping-")
	if len(pings) != 1 {
		t.Fatalf("the cron line's runs: %+v", pings)
	}
	exCheckRun(t, addr, pings[0].TaskID, "nightly_backup", apollo.StatusSuccess, "running/1 success/2")
	var wrapped []apollo.Task
	for _, task := range exList(t, addr, "nightly_backup") {
		if task.TaskID != "backup-20261129" && !strings.HasPrefix(task.TaskID, "nightly_backup@ping-") {
			wrapped = append(wrapped, task)
		}
	}
	if len(wrapped) != 1 || wrapped[0].Status != apollo.StatusSuccess || wrapped[0].TimeoutMs != (2*time.Hour+15*time.Second).Milliseconds() { // --timeout + the default --kill-grace + 5 s for the report
		t.Fatalf("apollo exec's run: %+v", wrapped)
	}
}
