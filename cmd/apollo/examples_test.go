package main

// The reporters in examples/ and the shell examples in the docs, run as real
// subprocesses against a real server, so that none of them can rot: each
// test checks through the API that the runs arrived with the right states
// and sequences. python3 and curl are on the CI machine; elsewhere these
// tests skip, unless APOLLO_REQUIRE_EXAMPLES=1 makes a missing tool fail.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
)

// exTool returns the path of a program the examples need, or skips.
func exTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("APOLLO_REQUIRE_EXAMPLES") == "1" {
			t.Fatalf("%s is needed to test the examples (APOLLO_REQUIRE_EXAMPLES=1): %v", name, err)
		}
		t.Skipf("%s not found; the examples that need it are not tested (set APOLLO_REQUIRE_EXAMPLES=1 to fail instead)", name)
	}
	return p
}

// exRepoFile is the absolute path of a file of the repository; tests run
// in cmd/apollo.
func exRepoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// watchedOutput collects a subprocess's output and lets a test wait until
// some text appears in it, without polling.
type watchedOutput struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newWatchedOutput() *watchedOutput { return &watchedOutput{changed: make(chan struct{})} }

func (w *watchedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *watchedOutput) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor returns once text appears in the output, or fails the test.
func (w *watchedOutput) waitFor(t *testing.T, text string, done <-chan struct{}) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		found, changed := strings.Contains(w.b.String(), text), w.changed
		w.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-done:
			t.Fatalf("the process exited before writing %q:\n%s", text, w)
		case <-timeout:
			t.Fatalf("%q not written within 60s:\n%s", text, w)
		}
	}
}

// exProc is an example running as a subprocess.
type exProc struct {
	cmd            *exec.Cmd
	stdout, stderr *watchedOutput
	done           chan struct{}
	err            error
}

// startEx runs name with args in its own process group, with env added to
// the test's environment; the test's end kills what is still running.
func startEx(t *testing.T, env []string, name string, args ...string) *exProc {
	t.Helper()
	p := &exProc{cmd: exec.Command(name, args...), stdout: newWatchedOutput(), stderr: newWatchedOutput(), done: make(chan struct{})}
	p.cmd.Env = append(exEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// exEnv is the test's environment without the variables that would point
// the examples at another server, and with Python told not to leave
// __pycache__ in examples/.
func exEnv() []string {
	env := []string{"PYTHONDONTWRITEBYTECODE=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APOLLO_SERVER=") && !strings.HasPrefix(kv, "APOLLO_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// exit waits for the process and returns its exit code.
func (p *exProc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%v still running after 90s\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// runEx runs an example to its end and checks its exit code.
func runEx(t *testing.T, wantCode int, name string, args ...string) (stdout, stderr string) {
	t.Helper()
	p := startEx(t, nil, name, args...)
	if code := p.exit(t); code != wantCode {
		t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, p.stdout, p.stderr)
	}
	return p.stdout.String(), p.stderr.String()
}

// exTask reads one task with its history through the API.
func exTask(t *testing.T, addr, id string) apollo.Task {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/tasks/" + url.PathEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var task apollo.Task
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("task %s: HTTP %d", id, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&task); err != nil {
		t.Fatal(err)
	}
	return task
}

// exTimeline is a task's history as "status/sequence" words, for comparing;
// records the server wrote itself start with their kind ("timeout:").
func exTimeline(task apollo.Task) string {
	var parts []string
	for _, r := range task.History {
		kind := ""
		if r.Kind != apollo.KindReport {
			kind = r.Kind.String() + ":"
		}
		parts = append(parts, fmt.Sprintf("%s%s/%d", kind, r.Status, r.Sequence))
	}
	return strings.Join(parts, " ")
}

// exCheckRun checks a task's job, final status and the statuses and
// sequences of its history.
func exCheckRun(t *testing.T, addr, id, job string, status apollo.Status, history string) apollo.Task {
	t.Helper()
	task := exTask(t, addr, id)
	if task.Name != job || task.Status != status || exTimeline(task) != history {
		t.Errorf("task %s: job %q status %s history %q; want job %q status %s history %q",
			id, task.Name, task.Status, exTimeline(task), job, status, history)
	}
	return task
}

// exSystem reads one counter of GET /api/v1/system, e.g. "bus", "duplicate".
func exSystem(t *testing.T, addr, part, field string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/system")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sys map[string]map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&sys); err != nil {
		t.Fatal(err)
	}
	v, ok := sys[part][field].(float64)
	if !ok {
		t.Fatalf("no %s.%s in /api/v1/system", part, field)
	}
	return int64(v)
}

// exServer starts a server with cfg changed by tweak, on addr when given.
func exServer(t *testing.T, addr string, tweak func(*config.Config)) string {
	t.Helper()
	cfg := testConfig(t)
	if addr != "" {
		cfg.Listen = addr
	}
	if tweak != nil {
		tweak(&cfg)
	}
	a, _, _ := inProcess(t, cfg)
	return a
}

// exStatusesGrowing returns the statuses of a task's history and checks that
// its sequences grow (the reporters' default sequence is the step's place
// in a run).
func exStatusesGrowing(t *testing.T, task apollo.Task) string {
	t.Helper()
	var st []string
	var last int64
	for _, r := range task.History {
		if r.Sequence <= last {
			t.Errorf("task %s: sequence %d after %d", task.TaskID, r.Sequence, last)
		}
		last = r.Sequence
		st = append(st, r.Status.String())
	}
	return strings.Join(st, " ")
}

func TestPythonReporterCommandLine(t *testing.T) {
	t.Parallel()
	py := exTool(t, "python3")
	script := exRepoFile(t, "examples/python/apollo_report.py")
	addr := exServer(t, "", nil)
	task := checkReporterSteps(t, addr, "py-cli-1", func(code int, args ...string) (string, string) {
		return runEx(t, code, py, append([]string{script, "--server", "http://" + addr}, args...)...)
	}, []string{"--name", "py_cli", "--timeout", "30m", "--extra", "host=db1"}, []string{"--cost", "95s"})
	if task.Name != "py_cli" || task.CostMs != 95_000 || task.TimeoutMs != 30*60_000 || !strings.Contains(string(task.History[0].Extra), `"host":"db1"`) {
		t.Errorf("fields: name %s cost %d timeout %d extra %s", task.Name, task.CostMs, task.TimeoutMs, task.History[0].Extra)
	}
}

// checkReporterSteps takes an example reporter through a run's steps
// against the server at addr (report runs it with args, after its own
// server flag) and checks what the protocol promises whatever the
// language: the start accepted; an old sequence and the same step again
// duplicates; a step back refused as an illegal transition and a word
// that is no status refused, both with exit 2; a run reported only by its
// end landing at once (issue 15.1); an event ahead of a missing one
// waiting. running and success are the flags of the run's first two
// steps, written each reporter's way; the run is returned as the server
// keeps it, for the caller to check what they set.
func checkReporterSteps(t *testing.T, addr, id string, report func(code int, args ...string) (string, string), running, success []string) apollo.Task {
	t.Helper()
	step := func(code int, args ...string) (string, string) {
		return report(code, append([]string{"--task", id}, args...)...)
	}
	if out, _ := step(0, append([]string{"--status", "running"}, running...)...); out != "accepted\n" {
		t.Errorf("running: stdout %q", out)
	}
	step(0, append([]string{"--status", "success"}, success...)...)
	if out, _ := step(0, "--status", "success", "--seq", "1"); !strings.HasPrefix(out, "duplicate") {
		t.Errorf("an old sequence: stdout %q, want duplicate", out)
	}
	if out, _ := step(0, "--status", "success"); !strings.HasPrefix(out, "duplicate") {
		t.Errorf("the same step again: stdout %q, want duplicate", out)
	}
	if _, errOut := step(2, "--status", "running", "--seq", "5"); !strings.Contains(errOut, "illegal transition success -> running") {
		t.Errorf("an illegal transition: stderr %q", errOut)
	}
	step(2, "--status", "finished") // not a status: the reporter says so
	// A reason that quotes the value, with its hint: the shell's reader
	// of the answer stopped at the first escaped quote and printed only
	// "taskID: \\".
	if _, errOut := report(2, "--task", "..", "--status", "running"); !strings.Contains(errOut,
		`taskID: ".." cannot be named in a URL (use a name with a letter or digit in it;`) {
		t.Errorf("a reason with quotes: stderr %q", errOut)
	}
	// A --seq given is sent as given: 0 is refused, not taken for "no --seq"
	// and replaced by the step's default.
	if _, errOut := report(2, "--task", id+"-zero", "--status", "running", "--seq", "0"); !strings.Contains(errOut, "0 is below 1") {
		t.Errorf("--seq 0: stderr %q, want it refused", errOut)
	}
	// A value out of range is refused, and the reporter says which field.
	if _, errOut := report(2, "--task", id+"-range", "--status", "running", "--timeout", "34560000"); !strings.Contains(errOut, "timeoutMs: 34560000000 ms is over the limit") {
		t.Errorf("a timeout of 400 days: stderr %q", errOut)
	}
	if out, _ := report(0, "--task", id+"-end", "--name", "end_only", "--status", "failed"); out != "accepted\n" {
		t.Errorf("an end alone: stdout %q", out)
	}
	if end := exTask(t, addr, id+"-end"); end.Status != apollo.StatusFailed || end.StartedAt != 0 || end.FinishedAt == 0 {
		t.Errorf("an end alone: %+v", end)
	}
	report(0, "--task", id+"-wait", "--status", "running", "--seq", "1")
	if out, _ := report(0, "--task", id+"-wait", "--status", "pending", "--seq", "3"); !strings.HasPrefix(out, "waiting (") {
		t.Errorf("an event that waits: stdout %q", out)
	}
	task := exTask(t, addr, id)
	if got := exStatusesGrowing(t, task); got != "running success" || task.Status != apollo.StatusSuccess {
		t.Errorf("task: %s %q", task.Status, got)
	}
	return task
}

// pyLib runs a Python program that imports the example as a library.
func pyLib(t *testing.T, wantCode int, program string, args ...string) (stdout, stderr string) {
	t.Helper()
	py, pyArgs := pyCommand(t, program, args...)
	return runEx(t, wantCode, py, pyArgs...)
}

// pyCommand is python3 and its arguments to run program with the library.
func pyCommand(t *testing.T, program string, args ...string) (string, []string) {
	t.Helper()
	py := exTool(t, "python3")
	dir := filepath.Dir(exRepoFile(t, "examples/python/apollo_report.py"))
	prelude := "import sys, json; sys.path.insert(0, " + fmt.Sprintf("%q", dir) + ")\nfrom apollo_report import Reporter, ReportError\n"
	return py, append([]string{"-c", prelude + program}, args...)
}

func TestPythonReporterLibrary(t *testing.T) {
	t.Parallel()
	addr := exServer(t, "", nil)
	out, errOut := pyLib(t, 0, `
r = Reporter(sys.argv[1])
with r.run("py_ctx", task_id="py-ctx-ok", timeout=600):
    pass
try:
    with r.run("py_ctx", task_id="py-ctx-fail"):
        raise RuntimeError("disk full")
except RuntimeError:
    pass
run = r.task("py-steps", name="py_steps")
import datetime
run.pending(scheduled_at=datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5))
run.running(timeout=60)
run.success(cost=2.5, extra={"rows": 1200})
with Reporter(sys.argv[1], batch=True, batch_size=4) as b:
    for i in range(5):
        t = b.task("py-batch-%d" % i, "py_batch")
        t.running()
        t.failed() if i == 3 else t.success()
print(json.dumps({"single": r.stats, "batch": b.stats}))
`, "http://"+addr)
	var stats map[string]map[string]int
	if err := json.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, errOut)
	}
	if stats["single"]["accepted"] != 7 || stats["batch"]["accepted"] != 10 || stats["single"]["retries"]+stats["batch"]["retries"] != 0 {
		t.Errorf("stats %v", stats)
	}
	exCheckRun(t, addr, "py-ctx-ok", "py_ctx", apollo.StatusSuccess, "running/1 success/2")
	failed := exCheckRun(t, addr, "py-ctx-fail", "py_ctx", apollo.StatusFailed, "running/1 failed/2")
	if !strings.Contains(string(failed.History[1].Extra), "RuntimeError: disk full") {
		t.Errorf("the exception is not in extra: %s", failed.History[1].Extra)
	}
	steps := exCheckRun(t, addr, "py-steps", "py_steps", apollo.StatusSuccess, "pending/1 running/2 success/3")
	if age := time.Now().UnixMilli() - steps.ScheduledAt; age < 5000 || age > 60_000 || steps.CostMs != 2500 {
		t.Errorf("scheduledAt %d cost %d", steps.ScheduledAt, steps.CostMs)
	}
	for i := range 5 {
		want := apollo.StatusSuccess
		if i == 3 {
			want = apollo.StatusFailed
		}
		exCheckRun(t, addr, fmt.Sprintf("py-batch-%d", i), "py_batch", want, "running/1 "+want.String()+"/2")
	}
}

// The reporter starts before the server listens: it retries until the
// server is up, then the event arrives once.
func TestPythonReporterWaitsForServer(t *testing.T) {
	t.Parallel()
	py := exTool(t, "python3")
	addr := freeAddr(t)
	p := startEx(t, nil, py, exRepoFile(t, "examples/python/apollo_report.py"), "--server", "http://"+addr,
		"--task", "py-early", "--name", "py_early", "--status", "running", "--seq", "1")
	p.stderr.waitFor(t, "server unreachable", p.done)
	p.stderr.waitFor(t, "retrying in", p.done)
	exServer(t, addr, nil)
	if code := p.exit(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr)
	}
	exCheckRun(t, addr, "py-early", "py_early", apollo.StatusRunning, "running/1")
}

// Over the token's rate limit the server answers 429 with Retry-After; the
// reporter waits and resends. The server's clock stands still until the
// reporter has retried (heldClock), so the 429 does not depend on how fast
// the machine runs the reporter.
func TestPythonReporterRateLimited(t *testing.T) {
	t.Parallel()
	addr, clock := rateLimitedServer(t)
	py, args := pyCommand(t, `
with Reporter(sys.argv[1]).run("py_limited", task_id="py-429"):
    pass
`, "http://"+addr)
	errOut := retriedAfter429(t, clock, py, args...)
	if !strings.Contains(errOut, "HTTP 429") || !strings.Contains(errOut, "retrying in") {
		t.Errorf("no 429 retry in stderr:\n%s", errOut)
	}
	exCheckRun(t, addr, "py-429", "py_limited", apollo.StatusSuccess, "running/1 success/2")
}

// A batch whose events get different answers: only the retry_later one is
// resent (a resent accepted event would count as a duplicate).
func TestPythonReporterResendsOnlyRetryLater(t *testing.T) {
	t.Parallel()
	addr := exServer(t, "", func(c *config.Config) { c.Limits.Tasks = 1 }) // a second task is refused
	out, errOut := pyLib(t, 0, `
r = Reporter(sys.argv[1], give_up_after=3)
r.task("py-first", "py_cap").running()
try:
    r.send([{"taskID": "py-first", "sequence": 2, "status": "success", "ts": 1795000000000},
            {"taskID": "py-second", "sequence": 1, "status": "running", "ts": 1795000000000}])
    print("delivered")
except ReportError as e:
    print(json.dumps([x and x["result"] for x in e.results]))
`, "http://"+addr)
	if strings.TrimSpace(out) != `["accepted", null]` {
		t.Errorf("results %q\n%s", out, errOut)
	}
	// With the server's reason: resending helps only once it is gone.
	if !strings.Contains(errOut, "1 event(s) answered retry_later: not stored: 1 tasks in memory, the limit; retrying in") {
		t.Errorf("stderr:\n%s", errOut)
	}
	exCheckRun(t, addr, "py-first", "py_cap", apollo.StatusSuccess, "running/1 success/2")
	if d := exSystem(t, addr, "bus", "duplicate"); d != 0 {
		t.Errorf("%d duplicates: the accepted event was resent", d)
	}
	if r := exSystem(t, addr, "bus", "refused"); r < 2 {
		t.Errorf("refused %d times; the retry_later event was not resent", r)
	}
}

// shellEx runs the shell reporter with sh (dash on Debian: POSIX, no bashisms).
func shellEx(t *testing.T) (sh, script string) {
	t.Helper()
	exTool(t, "curl")
	return exTool(t, "sh"), exRepoFile(t, "examples/shell/apollo-report.sh")
}

func TestShellReporter(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	addr := exServer(t, "", nil)
	srv := "http://" + addr
	task := checkReporterSteps(t, addr, "sh-1", func(code int, args ...string) (string, string) {
		return runEx(t, code, sh, append([]string{script, "--server", srv, "report"}, args...)...)
	}, []string{"--name", "sh_job", "--timeout", "600", "--extra", `note=said "hi" \o/`}, []string{"--cost", "3"})
	if task.CostMs != 3000 || task.TimeoutMs != 600_000 {
		t.Errorf("task: cost %d timeout %d", task.CostMs, task.TimeoutMs)
	}
	if x := string(task.History[0].Extra); x != `{"note":"said \"hi\" \\o/"}` {
		t.Errorf("extra %s", x)
	}
	// A number the shell's arithmetic cannot hold in milliseconds wrapped
	// around: the server was sent -1000 and the reporter said "-1000 is
	// negative". It is a mistake in the arguments, said as given.
	for _, flag := range []string{"--timeout", "--cost", "--scheduled-at"} {
		_, errOut := runEx(t, 2, sh, script, "--server", srv, "report", "--task", "sh-huge", "--status", "running", flag, "9223372036854775807")
		if !strings.Contains(errOut, flag+" 9223372036854775807") {
			t.Errorf("%s 9223372036854775807: stderr %q", flag, errOut)
		}
	}

	// run: the command's output and exit code pass through; the run is
	// reported running, then success or failed with the exit code.
	out, _ := runEx(t, 3, sh, script, "--server", srv, "run", "--name", "sh_run", "--task", "sh-run-fail", "--",
		"sh", "-c", `echo "task $APOLLO_TASK_ID of $APOLLO_JOB_NAME"; exit 3`)
	if out != "task sh-run-fail of sh_run\n" {
		t.Errorf("the command's stdout: %q", out)
	}
	failed := exCheckRun(t, addr, "sh-run-fail", "sh_run", apollo.StatusFailed, "running/1 failed/2")
	if !strings.Contains(string(failed.History[1].Extra), `"exitCode":3`) {
		t.Errorf("extra %s", failed.History[1].Extra)
	}
	runEx(t, 0, sh, script, "--server", srv, "run", "--name", "sh_run", "--task", "sh-run-ok", "--", "true")
	exCheckRun(t, addr, "sh-run-ok", "sh_run", apollo.StatusSuccess, "running/1 success/2")
	// A start the server rejects (a deadline over 366 days) is said once;
	// it went again with the end, was rejected again, and the reporter
	// said the end "was not reported", though the server had it.
	_, errOut := runEx(t, 0, sh, script, "--server", srv, "run", "--name", "sh_run", "--task", "sh-run-long", "--timeout", "40000000", "--", "true")
	if strings.Count(errOut, "rejected, not resent: timeoutMs: 40000000000 ms is over the limit") != 1 || strings.Contains(errOut, "not reported") {
		t.Errorf("a start rejected: stderr %q", errOut)
	}
	exCheckRun(t, addr, "sh-run-long", "sh_run", apollo.StatusSuccess, "success/2")
}

// The server is down when the reporter starts: `report` retries until it is
// up; `run` does not hold the job back, and sends its start with its end.
func TestShellReporterWaitsForServer(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	addr := freeAddr(t)
	srv := "http://" + addr
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	run := startEx(t, nil, sh, script, "--server", srv, "run", "--name", "sh_early", "--task", "sh-early-run",
		"--start-wait", "0", "--", "sh", "-c", `read line < "$0"`, fifo)
	run.stderr.waitFor(t, "the start of sh-early-run was not reported; it goes with the end", run.done)
	rep := startEx(t, nil, sh, script, "--server", srv, "report", "--task", "sh-early", "--name", "sh_early",
		"--status", "running", "--seq", "1")
	rep.stderr.waitFor(t, "server unreachable", rep.done)
	rep.stderr.waitFor(t, "retrying in", rep.done)

	exServer(t, addr, nil)
	if code := rep.exit(t); code != 0 {
		t.Fatalf("report: exit %d\n%s", code, rep.stderr)
	}
	exCheckRun(t, addr, "sh-early", "sh_early", apollo.StatusRunning, "running/1")
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // lets the command end
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
	if code := run.exit(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.stderr)
	}
	exCheckRun(t, addr, "sh-early-run", "sh_early", apollo.StatusSuccess, "running/1 success/2")
}

// heldClock is the system clock with Now standing still while held: a
// server on it sees every request in the same second of its rate limiter,
// however slowly a loaded machine runs the client between them.
type heldClock struct {
	apollo.Clock
	at   time.Time
	held atomic.Bool
}

func (c *heldClock) Now() time.Time {
	if c.held.Load() {
		return c.at
	}
	return c.Clock.Now()
}

// rateLimitedServer serves one event a second per token, on a clock that
// stands still until retriedAfter429 lets it go.
func rateLimitedServer(t *testing.T) (string, *heldClock) {
	t.Helper()
	clock := &heldClock{Clock: apollo.SystemClock, at: time.Now()}
	clock.held.Store(true)
	cfg := testConfig(t)
	cfg.Limits.IngestPerSec = 1
	addr, _, _ := inProcessWith(t, cfg, clock)
	return addr, clock
}

// retriedAfter429 runs a reporter that must exit 0, lets the server's
// clock move once the reporter says it is retrying, and returns its stderr.
func retriedAfter429(t *testing.T, clock *heldClock, name string, args ...string) string {
	t.Helper()
	p := startEx(t, nil, name, args...)
	p.stderr.waitFor(t, "retrying in", p.done)
	clock.held.Store(false)
	if code := p.exit(t); code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, p.stderr)
	}
	return p.stderr.String()
}

// TestShellReporterRateLimited: over the token's one event a second, the
// reporter is answered 429 and retries until it gets through. The server's
// clock stands still until the reporter has retried, so its second event
// always meets the empty bucket; then time moves and the retry succeeds.
func TestShellReporterRateLimited(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	addr, clock := rateLimitedServer(t)
	errOut := retriedAfter429(t, clock, sh, script, "--server", "http://"+addr, "run", "--name", "sh_limited", "--task", "sh-429", "--", "true")
	if !strings.Contains(errOut, "HTTP 429") || !strings.Contains(errOut, "retrying in") {
		t.Errorf("no 429 retry in stderr:\n%s", errOut)
	}
	exCheckRun(t, addr, "sh-429", "sh_limited", apollo.StatusSuccess, "running/1 success/2")
}

// The clock steps back while the job runs (NTP corrects it): the shell's
// run measured the job's cost from two readings of date, sent a negative
// costMs, and the server rejected the end: the run stayed running until
// its timeout. A cost below zero is not known, and is left to the server.
func TestShellReporterClockStepsBack(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	realDate := exTool(t, "date")
	addr := exServer(t, "", nil)
	dir := t.TempDir()
	// Each reading in milliseconds is a second before the one before.
	fake := "#!/bin/sh\ncase $1 in\n+%s%3N) n=$(cat \"$FAKE_NOW\"); echo $n; echo $((n - 1000)) >\"$FAKE_NOW\" ;;\n*) exec " + realDate + " \"$@\" ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(dir, "date"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "now"), []byte("1795000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startEx(t, []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "FAKE_NOW=" + filepath.Join(dir, "now")},
		sh, script, "--server", "http://"+addr, "run", "--name", "sh_clock", "--task", "sh-clock", "--", "true")
	if code := p.exit(t); code != 0 || p.stderr.String() != "" {
		t.Fatalf("exit %d\n%s", code, p.stderr)
	}
	exCheckRun(t, addr, "sh-clock", "sh_clock", apollo.StatusSuccess, "running/1 success/2")
}

// TestShellReporterSeqWithLeadingZeros: a --seq written with leading
// zeros (007, from a printf %03d counter) went into the JSON as it was,
// which JSON forbids: the server refused the whole request as malformed
// JSON, and the reporter said so with no word of --seq. It is the number
// 7, as in the Python reporter and apollo report.
func TestShellReporterSeqWithLeadingZeros(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	addr := exServer(t, "", nil)
	srv := "http://" + addr
	runEx(t, 0, sh, script, "--server", srv, "report", "--task", "sh-zeros", "--name", "zeros", "--status", "running", "--seq", "007")
	if got := exTask(t, addr, "sh-zeros"); got.Sequence != 7 || got.Status != apollo.StatusRunning {
		t.Fatalf("task: sequence %d status %s, want 7 running", got.Sequence, got.Status)
	}
	// 0 stays 0: the server's to refuse, with its reason.
	if _, errOut := runEx(t, 2, sh, script, "--server", srv, "report", "--task", "sh-zeros", "--status", "success", "--seq", "000"); !strings.Contains(errOut, "sequence") {
		t.Errorf("--seq 000: stderr %q", errOut)
	}
}

// TestPythonReporterNeverBreaksTheJobOnABadSetting: a token read from a
// file with Windows line ends ("\r"), or a --server without http://, made
// urllib raise ValueError out of the reporter: the job's body never ran,
// though the library promises that monitoring never breaks a job, and the
// command line died with a traceback (the token in it). Both are now a
// ReportError the library logs, and the command line's exit 2 with the
// reason.
func TestPythonReporterNeverBreaksTheJobOnABadSetting(t *testing.T) {
	t.Parallel()
	addr := exServer(t, "", nil)
	for _, c := range []struct{ server, token, want string }{
		{"http://" + addr, "apl_secret\r", "control character"},
		{addr, "", "http://"},
	} {
		out, errOut := pyLib(t, 0, `
r = Reporter(sys.argv[1], token=sys.argv[2] or None)
with r.run("py_bad", task_id="py-bad"):
    print("the job ran")
`, c.server, c.token)
		if out != "the job ran\n" || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "Traceback") || strings.Contains(errOut, "apl_secret") {
			t.Errorf("library, server %q token %q: stdout %q stderr %q", c.server, c.token, out, errOut)
		}
		args := []string{exRepoFile(t, "examples/python/apollo_report.py"), "--server", c.server, "--task", "py-bad", "--status", "running"}
		if c.token != "" {
			args = append(args, "--token", c.token)
		}
		_, errOut = runEx(t, 2, exTool(t, "python3"), args...)
		if !strings.Contains(errOut, c.want) || strings.Contains(errOut, "Traceback") || strings.Contains(errOut, "apl_secret") {
			t.Errorf("command line, server %q token %q: stderr %q", c.server, c.token, errOut)
		}
	}
}

// TestShellReporterSaysTheTokenHoldsALineEnd: a token read from a file
// with Windows line ends ($(cat token) keeps the "\r") made the server
// refuse the request as a malformed header, and the reporter said only
// "the server refused the request: HTTP 400: ". It says what to fix.
func TestShellReporterSaysTheTokenHoldsALineEnd(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	addr := exServer(t, "", nil)
	_, errOut := runEx(t, 2, sh, script, "--server", "http://"+addr, "--token", "apl_secret\r", "report", "--task", "sh-crlf", "--status", "running")
	if !strings.Contains(errOut, "control character") || strings.Contains(errOut, "apl_secret") {
		t.Errorf("stderr %q", errOut)
	}
}

// TestShellReporterKeepsControlCharacters: the shell reporter turned tabs
// and line ends in a task ID or job name into spaces and dropped other
// control characters, where the server, the Go SDK and the Python example
// keep them: "a<TAB>b" and "a b" became one task (the second run's start
// answered "duplicate", and not recorded), and the shell and Python
// reporters put one run's steps in two tasks. A control character goes as
// a JSON escape, as the others send it.
func TestShellReporterKeepsControlCharacters(t *testing.T) {
	t.Parallel()
	sh, script := shellEx(t)
	addr := exServer(t, "", nil)
	srv := "http://" + addr
	report := func(args ...string) string {
		out, _ := runEx(t, 0, sh, append([]string{script, "--server", srv, "report"}, args...)...)
		return out
	}
	tab, esc := "sh-ctl\tx\x1b[31m\x01", "sh-ctl x[31m"
	for _, id := range []string{tab, esc} {
		if out := report("--task", id, "--name", "ctl\njob", "--status", "running", "--extra", "k\r=v\x7f\x02"); out != "accepted\n" {
			t.Errorf("%q: %q, want a run of its own accepted", id, out)
		}
	}
	pyOut, pyErr := pyLib(t, 0, `
r = Reporter(sys.argv[1])
print(r.send([{"taskID": sys.argv[2], "sequence": 4, "status": "success", "ts": 1795000000000}])[0]["result"])
`, srv, tab)
	if pyOut != "accepted\n" {
		t.Errorf("python, the same run's end: %q %s", pyOut, pyErr)
	}
	task := exCheckRun(t, addr, tab, "ctl\njob", apollo.StatusSuccess, "running/2 success/4")
	if x := string(task.History[0].Extra); x != `{"k\r":"v\u007f\u0002"}` && x != "{\"k\\r\":\"v\x7f\\u0002\"}" {
		t.Errorf("extra %s", x)
	}
	exCheckRun(t, addr, esc, "ctl\njob", apollo.StatusRunning, "running/2")
}

// TestPythonReporterLogsAValueAsData: the Python example logged a rejected
// event's task ID as it was: 100 KB of it on one stderr line, and the
// escape sequences in it written raw to the terminal that shows the log
// (here one that clears the screen). It logs the ID quoted, control
// characters escaped, and cut to a length a log line can carry, with the
// server's reason.
func TestPythonReporterLogsAValueAsData(t *testing.T) {
	t.Parallel()
	addr := exServer(t, "", nil)
	id := "py-\x1b[2J" + strings.Repeat("a", 100_000)
	_, errOut := pyLib(t, 0, `
r = Reporter(sys.argv[1])
r.task(sys.argv[2], "py_long").running()
`, "http://"+addr, id)
	if strings.Contains(errOut, "\x1b") || len(errOut) > 2000 {
		t.Errorf("stderr of %d bytes, escape sequence in it: %v\n%.300q", len(errOut), strings.Contains(errOut, "\x1b"), errOut)
	}
	if !strings.Contains(errOut, `"py-\u001b[2Jaaa`) || !strings.Contains(errOut, "taskID: 100007 bytes, over the limit of 256") {
		t.Errorf("stderr %.600q", errOut)
	}
}
