package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/sched"
)

// Exit codes of apollo exec besides the command's own (docs/cli.md),
// following timeout(1) and the shells.
const (
	exitTimedOut   = 124
	exitCannotRun  = 126
	exitNotFoundEx = 127
)

// forwarded are the signals apollo exec passes on to the command's group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// maxDeadline is the longest deadline an event may carry (timeoutMs).
const maxDeadline = apollo.MaxDurationMs * time.Millisecond

// reportWait bounds how long apollo exec waits, after the command, for the
// server to take its events: past it they go to the spool.
const reportWait = 3 * time.Second

func newExecCmd() *cobra.Command {
	var (
		cf             clientFlags
		name, task     string
		timeout, grace time.Duration
		spool          string
	)
	cmd := &cobra.Command{
		Use:   "exec --name NAME [flags] -- COMMAND [ARGS...]",
		Short: "Run a command and report its run: start, end, exit code, output tail",
		Long: `Run COMMAND as one run of the job NAME and report it: pending and running
when it starts; then success, failed (with the exit code, the duration and
the last lines of its output) or timeout. Its output goes to the terminal
as usual.

The command runs in its own process group. --timeout stops the whole group:
SIGTERM, then SIGKILL after --kill-grace. SIGINT, SIGTERM, SIGHUP and SIGQUIT
sent to apollo exec are passed on to the group. Whatever the command leaves
running in its group when it exits is killed, as the scheduler does.
Standard input is passed on unless it is a terminal.

Reporting never stops the job: if the server cannot be reached or refuses,
apollo exec says so on stderr (lines starting "apollo exec:") and the
command runs all the same. Events the server did not take within a few
seconds after the command wait in the spool directory, and the next apollo
exec with the same token sends them first.

The command sees APOLLO_TASK_ID and APOLLO_JOB_NAME in its environment.

Exit code: the command's own; 128+N when signal N ended it; 124 when it
timed out; 126 when it could not be started, 127 when it was not found;
2 for a mistake in apollo exec's own flags (the command does not run).`,
		Example: `  apollo exec --name nightly_backup -- /usr/local/bin/backup --full
  apollo exec --name etl --timeout 30m --kill-grace 30s -- python3 etl.py
  # a crontab line
  30 2 * * *  APOLLO_SERVER=https://apollo.example.com APOLLO_TOKEN=apl_... apollo exec --name nightly_backup -- /usr/local/bin/backup`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if task == "" {
				task = defaultTaskID(name, time.Now().UnixMilli(), os.Getpid())
			}
			probe := apollo.Event{TaskID: task, Name: name, Sequence: 1, Status: apollo.StatusPending, Ts: apollo.MinTs} // only the IDs are checked here
			switch err := probe.Validate(); {
			case name == "":
				return usageError("--name: say which job this run belongs to")
			case err != nil:
				return &exitError{code: exitUsage, err: err}
			case timeout < 0 || grace < 0:
				return usageError("--timeout and --kill-grace cannot be negative")
			case timeout > 0 && (timeout > maxDeadline || grace > maxDeadline-timeout):
				// The running event carries both: the server refused it, and
				// the run stayed pending for ever while the command succeeded.
				return usageError("--timeout %v plus --kill-grace %v is over the limit of 366 days (leave --timeout out for no deadline)", timeout, grace)
			}
			stderr := cmd.ErrOrStderr()
			if err := cf.resolveCLI(); err != nil {
				fmt.Fprintf(stderr, "apollo exec: %v; using the defaults\n", err)
				cf.resolve()
			}
			sigs := make(chan os.Signal, 8)
			signal.Notify(sigs, forwarded...)
			defer signal.Stop(sigs)
			// A reader of the output that went away (| head) must not kill
			// apollo exec before it reports: Go ends a program on SIGPIPE
			// from a write to its stdout or stderr unless it is notified of
			// it; then the write fails with EPIPE, and the pass-through
			// closes the command's pipe, which breaks for the command as it
			// would without apollo exec. (Notify, not Ignore: an ignored
			// signal stays ignored in the command.)
			pipes := make(chan os.Signal, 1)
			signal.Notify(pipes, syscall.SIGPIPE)
			defer signal.Stop(pipes)

			rep := openExecReporter(cf, spool, task, name, stderr)
			r := &execRun{argv: args, taskID: task, name: name, timeout: timeout, grace: grace, clock: apollo.SystemClock,
				signals: sigs, stdin: passedStdin(cmd.InOrStdin()), stdout: cmd.OutOrStdout(), stderr: stderr, rep: rep}
			code := r.run()
			rep.close(reportWait)
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // everything after COMMAND is the command's
	cf.register(cmd)
	fl.StringVar(&name, "name", "", "the job this run belongs to (required)")
	fl.StringVar(&task, "task", "", "the run's task ID, new for every run (default NAME@exec-<unix ms>-<pid>)")
	fl.DurationVar(&timeout, "timeout", 0, "stop the command after this long and report timeout (0: never)")
	fl.DurationVar(&grace, "kill-grace", 10*time.Second, "after SIGTERM, wait this long before SIGKILL")
	fl.StringVar(&spool, "spool", defaultSpoolDir(), `keep unsent events here for the next apollo exec ("" for none)`)
	return cmd
}

// defaultTaskID is NAME@exec-<unix ms>-<pid>, with NAME cut (at a
// character) so that the ID fits the limit: a job name near its own limit
// made an ID over it, and apollo exec refused to run with an error about a
// --task nobody gave.
func defaultTaskID(name string, ms int64, pid int) string {
	suffix := fmt.Sprintf("@exec-%d-%d", ms, pid)
	if n := apollo.MaxTaskIDBytes - len(suffix); len(name) > n {
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		name = name[:n]
	}
	return name + suffix
}

// defaultSpoolDir is $XDG_CACHE_HOME/apollo/spool, else ~/.cache/apollo/spool.
func defaultSpoolDir() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "apollo", "spool")
}

// passedStdin is the standard input to hand to the command: a terminal is
// not, because the command's own process group is not the terminal's
// foreground group, and reading would stop it (SIGTTIN).
func passedStdin(in io.Reader) *os.File {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return f
}

// execRun is one wrapped run of a command.
type execRun struct {
	argv           []string
	taskID, name   string
	timeout, grace time.Duration
	clock          apollo.Clock
	signals        <-chan os.Signal
	stdin          *os.File
	stdout, stderr io.Writer
	rep            *execReporter
}

// run runs the command to its end, reports it, and returns the exit code.
func (r *execRun) run() int {
	r.rep.step(apollo.StatusPending)
	// Read before the start: a command that ends at once (true) has its
	// end read by the process's waiter before a read after StartProcess,
	// and its duration came out negative, which the server refuses
	// (costMs -1; TestScripts/exec failed so on a loaded machine).
	started := r.clock.Now()
	p, err := sched.StartProcess(sched.ProcessSpec{Argv: r.argv, Stdin: r.stdin, Stdout: r.stdout, Stderr: r.stderr,
		Env: []string{"APOLLO_TASK_ID=" + r.taskID, "APOLLO_JOB_NAME=" + r.name}, Clock: r.clock})
	if err != nil {
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFoundEx
		}
		fmt.Fprintf(r.stderr, "apollo exec: cannot run %s: %v\n", r.argv[0], err)
		r.rep.step(apollo.StatusFailed, rawExtra(sched.EncodeExtra(map[string]any{"exitCode": code, "error": err.Error()}, "", "")))
		return code
	}
	if r.timeout > 0 {
		// The server marks the run timeout by itself if apollo exec dies
		// before it can: after the timeout, the grace, and the time
		// apollo exec's own report (with the output tails) takes, as for
		// the scheduler's runs (less of that slack within a few seconds
		// of the longest deadline an event may carry).
		r.rep.step(apollo.StatusRunning, agent.TimeoutAfter(min(sched.ServerDeadline(r.timeout, r.grace), maxDeadline)))
	} else {
		r.rep.step(apollo.StatusRunning)
	}
	timedOut, fwd := r.wait(p)
	res := p.Result()
	took := res.Ended.Sub(started)

	fields := map[string]any{"exitCode": res.ExitCode, "durationMs": took.Milliseconds()}
	if host, err := os.Hostname(); err == nil {
		fields["host"] = host
	}
	if res.Signaled {
		fields["signal"] = signalName(res.Signal)
	}
	if fwd != 0 {
		fields["forwardedSignal"] = signalName(fwd)
	}
	status, code := apollo.StatusFailed, res.ExitCode
	switch {
	case timedOut:
		status, code = apollo.StatusTimeout, exitTimedOut
		fields["killed"] = true
	case res.Signaled:
		code = 128 + int(res.Signal)
	case res.ExitCode == 0:
		status = apollo.StatusSuccess
	}
	r.rep.step(status, agent.Cost(took), rawExtra(sched.EncodeExtra(fields, res.StdoutTail, res.StderrTail)))
	// The end is reported; the output may still wait for its reader (a
	// pager, a slow pipe), which gets all of it before apollo exec exits.
	<-p.Passed()
	if res.Dropped > 0 {
		fmt.Fprintf(r.stderr, "apollo exec: %d bytes of output written after %s had ended (by a process it left behind) were not passed on: their reader was not taking them\n", res.Dropped, r.argv[0])
	}
	return code
}

// wait waits for the command to end, passing signals on and enforcing the
// timeout. It reports whether the timeout stopped the command, and the
// last signal passed on (0 for none).
func (r *execRun) wait(p *sched.Process) (timedOut bool, fwd syscall.Signal) {
	var deadline, kill <-chan time.Time
	if r.timeout > 0 {
		t := r.clock.NewTimer(r.timeout)
		defer t.Stop()
		deadline = t.C()
	}
	var killT apollo.Timer
	defer func() {
		if killT != nil {
			killT.Stop()
		}
	}()
	for {
		select {
		case <-p.Done():
			return timedOut, fwd
		case sig := <-r.signals:
			if p.Exited() {
				continue // the command ended: its output is read, nothing to pass the signal on to
			}
			if s, ok := sig.(syscall.Signal); ok {
				fwd = s
				if err := p.Signal(s); err != nil {
					fmt.Fprintf(r.stderr, "apollo exec: passing %s on: %v\n", signalName(s), err)
				}
			}
		case <-deadline:
			if p.Exited() {
				// It ended in time; its output is still read, while a
				// daemon it started holds it open: not a timeout.
				deadline = nil
				continue
			}
			deadline, timedOut = nil, true
			fmt.Fprintf(r.stderr, "apollo exec: %s timed out after %v; stopping it (SIGTERM, then SIGKILL after %v)\n", r.argv[0], r.timeout, r.grace)
			_ = p.Signal(syscall.SIGTERM)
			if r.grace <= 0 {
				_ = p.Signal(syscall.SIGKILL)
				continue
			}
			killT = r.clock.NewTimer(r.grace)
			kill = killT.C()
		case <-kill:
			kill = nil
			_ = p.Signal(syscall.SIGKILL)
		}
	}
}

// signalName is "SIGTERM" rather than syscall's "terminated".
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return fmt.Sprintf("signal %d (%v)", int(s), s)
}

// rawExtra sets an event's extra to JSON already encoded (and bounded) by
// sched.EncodeExtra.
func rawExtra(b []byte) agent.EventOption {
	return func(e *apollo.Event) error { e.Extra = b; return nil }
}
