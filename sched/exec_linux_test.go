package sched

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// These tests run real processes (sh, sleep, seq) on the real clock. They
// wait on reported events, a FIFO and pidfds, never by sleeping.

// signalLog wraps the real runner and records the signals the scheduler
// sends to each attempt's group.
type signalLog struct {
	runner
	mu   sync.Mutex
	sigs map[string][]syscall.Signal // by APOLLO_TASK_ID
}

type loggedProc struct {
	proc
	log  *signalLog
	task string
}

func (l *signalLog) start(spec *runSpec) (proc, error) {
	p, err := l.runner.start(spec)
	if err != nil {
		return nil, err
	}
	task := ""
	for _, kv := range spec.env {
		if v, ok := strings.CutPrefix(kv, "APOLLO_TASK_ID="); ok {
			task = v
		}
	}
	return &loggedProc{proc: p, log: l, task: task}, nil
}

func (p *loggedProc) signal(sig syscall.Signal) error {
	p.log.mu.Lock()
	p.log.sigs[p.task] = append(p.log.sigs[p.task], sig)
	p.log.mu.Unlock()
	return p.proc.signal(sig)
}

func (l *signalLog) of(task string) []syscall.Signal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sigs[task])
}

// realScheduler starts a scheduler on the real clock with the real runner.
func realScheduler(t *testing.T, src string) (*Scheduler, *recorder, *signalLog) {
	t.Helper()
	rec := newRecorder()
	sl := &signalLog{runner: execRunner{clock: apollo.SystemClock}, sigs: map[string][]syscall.Signal{}}
	s, err := newScheduler(mustParse(t, src), Options{Reporter: rec, Logger: quietLogger()}, sl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = s.Stop(ctx)
		rec.checkLifecycles(t)
	})
	return s, rec, sl
}

func trigger(t *testing.T, s *Scheduler, name string) string {
	t.Helper()
	id, err := s.Trigger(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func dailyJob(name, body string) string {
	return "jobs:\n  - name: " + name + "\n    schedule: \"@daily\"\n" + body
}

func TestExecOutputTailsAndExitCode(t *testing.T) {
	t.Parallel()
	s, rec, _ := realScheduler(t, dailyJob("noisy", `    shell: "for i in $(seq 1 50); do echo line$i; done; echo oops >&2; exit 3"`+"\n"))
	id := trigger(t, s, "noisy")
	ev := rec.waitFor(t, id, apollo.StatusFailed)
	x := extra(t, ev)
	var want strings.Builder
	for i := 31; i <= 50; i++ {
		want.WriteString("line" + strconv.Itoa(i) + "\n")
	}
	if x["exitCode"] != 3.0 || x["stdoutTail"] != want.String() || x["stderrTail"] != "oops\n" || x["attempt"] != 1.0 {
		t.Errorf("extra = %v", x)
	}
	if _, ok := x["durationMs"]; !ok {
		t.Error("no durationMs")
	}
}

func TestExecEnvironmentAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, rec, _ := realScheduler(t, dailyJob("env", `    command: ["sh", "-c", "test -n \"$PATH\" && echo \"$APOLLO_TASK_ID|$APOLLO_JOB_NAME|$APOLLO_SCHEDULED_AT|$APOLLO_ATTEMPT|$FOO|$(pwd)\""]
    env: {FOO: "bar baz"}
    dir: `+dir+"\n"))
	id := trigger(t, s, "env")
	ev := rec.waitFor(t, id, apollo.StatusSuccess)
	x := extra(t, ev)
	ms, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(id, "env@manual-"), "#1"), 10, 64)
	at := time.UnixMilli(ms).UTC().Format(time.RFC3339)
	if want := id + "|env|" + at + "|1|bar baz|" + dir + "\n"; x["stdoutTail"] != want || x["exitCode"] != 0.0 {
		t.Errorf("stdout %q, want %q", x["stdoutTail"], want)
	}
}

func TestExecStartFailure(t *testing.T) {
	t.Parallel()
	s, rec, _ := realScheduler(t, dailyJob("missing", "    command: [\"/nonexistent/program\"]\n"))
	id := trigger(t, s, "missing")
	x := extra(t, rec.waitFor(t, id, apollo.StatusFailed))
	if x["exitCode"] != -1.0 || !strings.Contains(x["error"].(string), "no such file") {
		t.Errorf("extra %v", x)
	}
}

func TestExecOutputIsBounded(t *testing.T) {
	t.Parallel()
	// A megabyte of one line on stdout, and on stderr lines of control
	// characters that JSON escapes to six bytes each.
	s, rec, _ := realScheduler(t, dailyJob("flood", `    shell: "head -c 1000000 /dev/zero | tr '\\0' x; for i in $(seq 1 200); do printf '\\001\\002\\003\\004\\005\\006\\007\\010\\n' >&2; done"`+"\n"))
	id := trigger(t, s, "flood")
	ev := rec.waitFor(t, id, apollo.StatusSuccess)
	if len(ev.Extra) > apollo.MaxExtraBytes {
		t.Fatalf("extra is %d bytes", len(ev.Extra))
	}
	x := extra(t, ev)
	out, _ := x["stdoutTail"].(string)
	if len(out) == 0 || len(out) > tailBytes || strings.Trim(out, "x") != "" {
		t.Errorf("stdout tail of %d bytes: %.40q", len(out), out)
	}
	if errTail, _ := x["stderrTail"].(string); !strings.HasSuffix(errTail, "\x07\b\n") {
		t.Errorf("stderr tail %q", errTail)
	}
}

// readFIFO returns the first line written to the FIFO at path.
func readFIFO(t *testing.T, path string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(path) // blocks until the job opens it for writing
		if err != nil {
			got <- ""
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(wait):
		t.Fatal("the job wrote nothing to the FIFO")
		return ""
	}
}

// waitGone waits until process pid has exited, through a pidfd, which
// becomes readable when the process ends, even if it is not our child.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	const sysPidfdOpen = 434 // pidfd_open(2), the same number on every Linux architecture Go supports
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return // already gone and reaped
	}
	if errno != 0 {
		t.Fatalf("pidfd_open(%d): %v", pid, errno)
	}
	defer syscall.Close(int(fd))
	var set syscall.FdSet
	set.Bits[fd/64] |= 1 << (fd % 64)
	tv := syscall.NsecToTimeval(wait.Nanoseconds())
	n, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv)
	if err != nil || n != 1 {
		t.Fatalf("process %d still runs (select = %d, %v)", pid, n, err)
	}
}

// pidAlive opens a pidfd on pid, which proves that pid was alive when the
// scheduler had not yet timed the run out.
func pidAlive(t *testing.T, pid int) {
	t.Helper()
	fd, _, errno := syscall.Syscall(434, uintptr(pid), 0, 0)
	if errno != 0 {
		t.Fatalf("process %d is not running: %v", pid, errno)
	}
	syscall.Close(int(fd))
}

func TestExecTimeoutKillsGrandchildren(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The job's shell obeys SIGTERM, but the grandchild it starts (a shell
	// ignoring SIGTERM, with its own sleep) does not: the group is killed
	// with SIGKILL as soon as the job's own process is gone.
	s, rec, sl := realScheduler(t, dailyJob("forks", `    shell: "sh -c 'trap \"\" TERM; sleep 300' & echo $! > `+fifo+`; wait"
    timeout: 1500ms
    kill_grace: 1m
`))
	id := trigger(t, s, "forks")
	pid, err := strconv.Atoi(readFIFO(t, fifo))
	if err != nil {
		t.Fatal(err)
	}
	pidAlive(t, pid)
	ev := rec.waitFor(t, id, apollo.StatusTimeout)
	if x := extra(t, ev); x["killed"] != true {
		t.Errorf("extra %v", x)
	}
	waitGone(t, pid)
	if got := sl.of(id); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM}) {
		t.Errorf("signals %v: the leader obeyed SIGTERM, no SIGKILL was needed for it", got)
	}
	if d := time.Duration(ev.CostMs) * time.Millisecond; d >= time.Minute {
		t.Errorf("took %v: the kill grace was waited out", d)
	}
}

func TestExecKillAfterGrace(t *testing.T) {
	t.Parallel()
	s, rec, sl := realScheduler(t, dailyJob("stubborn", `    shell: "trap '' TERM; sleep 300"
    timeout: 200ms
    kill_grace: 300ms
`))
	id := trigger(t, s, "stubborn")
	ev := rec.waitFor(t, id, apollo.StatusTimeout)
	if got := sl.of(id); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("signals %v, want SIGTERM then SIGKILL", got)
	}
	if ev.CostMs < 500 {
		t.Errorf("killed after %d ms, before timeout+grace", ev.CostMs)
	}
}

func TestExecStopKillsAtDeadline(t *testing.T) {
	t.Parallel()
	s, rec, _ := realScheduler(t, dailyJob("long", "    command: [sleep, \"300\"]\n"))
	id := trigger(t, s, "long")
	rec.waitFor(t, id, apollo.StatusRunning)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ctx); err == nil {
		t.Error("Stop = nil after killing a run")
	}
	if x := extra(t, rec.waitFor(t, id, apollo.StatusTimeout)); x["shutdown"] != true {
		t.Errorf("extra %v", x)
	}
}

// A command is found in the PATH its job's env sets, never in a directory
// of it that is relative; a command with a '/' is a path, relative to the
// job's dir.
func TestLookPathInTheJobsPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"tool", "sub/tool"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "plain"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	for _, tc := range []struct {
		name string
		env  []string
		want string // "" for not found
	}{
		{"tool", []string{"PATH=/nonexistent:" + dir}, filepath.Join(dir, "tool")},
		{"tool", []string{"PATH=" + dir, "PATH=" + sub}, filepath.Join(sub, "tool")}, // the last one counts
		{"tool", []string{"PATH=sub:/nonexistent"}, ""},
		{"plain", []string{"PATH=" + sub}, ""}, // not executable
		{"./tool", []string{"PATH=/nonexistent"}, "./tool"},
		{"sh", nil, "/"}, // the scheduler's own PATH; any absolute path
	} {
		got, err := lookPath(tc.name, tc.env)
		switch {
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "PATH of the job's env")):
			t.Errorf("lookPath(%q, %q) = %q, %v; want not found", tc.name, tc.env, got, err)
		case tc.want == "/" && (err != nil || !filepath.IsAbs(got)):
			t.Errorf("lookPath(%q, %q) = %q, %v; want an absolute path", tc.name, tc.env, got, err)
		case tc.want != "" && tc.want != "/" && (err != nil || got != tc.want):
			t.Errorf("lookPath(%q, %q) = %q, %v; want %q", tc.name, tc.env, got, err, tc.want)
		}
	}
}

// A run whose process ended within its timeout succeeded, even when a
// daemon it started in a session of its own holds its output open past
// the timeout: the output is read for up to drainGrace more, and the
// timeout that falls in that time is not the run's. Before, it was
// reported timeout, killed, with the run's own exit status lost. The
// timeout is moved on a fake clock once the job's process has exited.
func TestExecEndedRunIsNotTimedOutWhileADaemonHoldsItsOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifos := map[string]string{}
	for _, name := range []string{"leader", "daemon", "go"} {
		fifos[name] = filepath.Join(dir, name)
		if err := syscall.Mkfifo(fifos[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clk := apollo.NewFakeClock(time.Now())
	rec := newRecorder()
	src := dailyJob("daemonizes", `    shell: "echo $$ > `+fifos["leader"]+`; setsid sh -c 'echo $$ > `+fifos["daemon"]+`; exec sleep 60' & read _ < `+fifos["go"]+`"
    timeout: 1m
`)
	s, err := newScheduler(mustParse(t, src), Options{Clock: clk, Reporter: rec, Logger: quietLogger()}, execRunner{clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Stop(ctx)
	})
	id := trigger(t, s, "daemonizes")
	leader, err := strconv.Atoi(readFIFO(t, fifos["leader"]))
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := strconv.Atoi(readFIFO(t, fifos["daemon"])) // in its own session now
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	if !clk.BlockUntil(2, wait) { // the loop's timer and the run's timeout
		t.Fatalf("the run's timeout was never armed (%d timers)", clk.Waiters())
	}
	gofile, err := os.OpenFile(fifos["go"], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	gofile.WriteString("go\n")
	gofile.Close()
	waitGone(t, leader) // the job's process ended: the daemon alone holds the output
	clk.Advance(time.Minute)
	var ev apollo.Event
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for ended := false; !ended; {
		var changed chan struct{}
		for _, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusTimeout, apollo.StatusFailed} {
			if ev, ended, changed = rec.find(id, st); ended {
				break
			}
		}
		if !ended {
			select {
			case <-changed:
			case <-deadline.C:
				t.Fatalf("the run did not end:\n%s", rec.dump())
			}
		}
	}
	if x := extra(t, ev); ev.Status != apollo.StatusSuccess || x["exitCode"] != 0.0 {
		t.Errorf("the run is %s with %v, want success: its process ended before its timeout", ev.Status, x)
	}
}
