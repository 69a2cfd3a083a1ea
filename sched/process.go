package sched

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// ProcessSpec is what StartProcess runs.
type ProcessSpec struct {
	Argv []string
	Env  []string // added to this process's environment
	Dir  string
	// Stdin is handed to the process as it is; nil gives it /dev/null. An
	// *os.File, not a reader, so that no goroutine copies into the process
	// and the end of the process is the end of the run.
	Stdin *os.File
	// Stdout and Stderr, when set, receive the output as it comes, besides
	// the tails kept for the result; each from its own goroutine, so one
	// writer given for both must be safe for concurrent use. After a write
	// to one fails, it gets nothing more; the tails and the process go on.
	// A writer that is slow holds the process back while it runs, but not
	// the end of the process: see Passed.
	Stdout, Stderr io.Writer
	// Clock gives ProcessResult.Ended; default apollo.SystemClock.
	Clock apollo.Clock
}

// Process is a command running the way the scheduler runs a job: in its
// own process group, the last lines of its output kept, and whatever it
// left in its group killed when it exits. `apollo exec` uses it so that a
// wrapped command and a scheduled one behave the same.
type Process struct{ p proc }

// ProcessResult is how a process ended.
type ProcessResult struct {
	ExitCode int            // -1 when a signal ended it
	Signaled bool           // a signal ended it
	Signal   syscall.Signal // which one, when Signaled
	// The last lines (at most 20, at most 2 KiB) of each output stream.
	StdoutTail, StderrTail string
	// Dropped is how many bytes of output were read but are not passed on
	// to Stdout and Stderr: written after the process group was gone (by
	// a process that left it, with setsid), past 1 MiB, while their
	// reader was not taking them.
	Dropped int64
	// Ended is when the process exited (on ProcessSpec.Clock), which may
	// be up to 2 s before Done, while a daemon it started in a session of
	// its own holds its output open.
	Ended time.Time
}

// StartProcess starts spec.Argv in a new process group.
func StartProcess(spec ProcessSpec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("sched: StartProcess: no command to run")
	}
	p, err := execRunner{clock: cmp.Or(spec.Clock, apollo.SystemClock)}.start(&runSpec{
		argv: spec.Argv, env: spec.Env, dir: spec.Dir,
		stdin: spec.Stdin, stdout: spec.Stdout, stderr: spec.Stderr,
	})
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Signal sends sig to the process's whole group. A group that is gone
// already is not an error.
func (p *Process) Signal(sig syscall.Signal) error { return p.p.signal(sig) }

// Done is closed once the process has exited and its output is read:
// then its Result is known, even while the reader of Stdout or Stderr has
// yet to take the last of it.
func (p *Process) Done() <-chan struct{} { return p.p.done() }

// Exited reports whether the process has exited, while Done may wait up
// to 2 s more for its output: a deadline that passes then is not the
// process's (it ended in time).
func (p *Process) Exited() bool { return p.p.exited() }

// Passed is closed once the output is passed on to Stdout and Stderr (or
// given up on, when a write failed), after Done. A caller that exits
// waits for it, or that output is lost.
func (p *Process) Passed() <-chan struct{} {
	if ps, ok := p.p.(interface{ passed() <-chan struct{} }); ok {
		return ps.passed()
	}
	return p.p.done()
}

// Result is how the process ended; call it after Done is closed.
func (p *Process) Result() ProcessResult {
	r := p.p.result()
	return ProcessResult{ExitCode: r.exitCode, Signaled: r.signaled, Signal: r.sig, StdoutTail: r.stdout, StderrTail: r.stderr, Dropped: r.dropped, Ended: r.ended}
}

// EncodeExtra marshals fields plus the output tails (as stdoutTail and
// stderrTail) into at most apollo.MaxExtraBytes of JSON, the way the
// scheduler fills a run's extra: the oldest lines of the longer tail go
// first until it fits. It adds the tails to fields.
func EncodeExtra(fields map[string]any, stdout, stderr string) json.RawMessage {
	return encodeExtra(fields, stdout, stderr)
}
