package sched

import (
	"io"
	"os"
	"syscall"
	"time"
)

// runner starts processes. The scheduler's logic (schedules, dependencies,
// retries, timeouts, kill escalation) sits above it and is tested with a
// fake runner and a fake clock; execRunner runs real processes.
type runner interface {
	start(spec *runSpec) (proc, error)
}

// runSpec is what one attempt runs.
type runSpec struct {
	argv []string
	env  []string // added to the scheduler's own environment
	dir  string
	// Set only through StartProcess (apollo exec): stdin handed to the
	// process as it is (nil: /dev/null), and writers that get the output
	// as it comes, besides the tails.
	stdin          *os.File
	stdout, stderr io.Writer
}

// proc is a started attempt.
type proc interface {
	// signal sends sig to the attempt's whole process group.
	signal(sig syscall.Signal) error
	// done is closed when the process has exited and its output is read.
	done() <-chan struct{}
	// exited reports whether the process has exited, its output read or
	// not: done may come up to drainGrace later, while a daemon it
	// started holds its output open.
	exited() bool
	// result is valid once done is closed.
	result() procResult
	// group is the process group, and processIdentity of its leader; 0
	// and "" when there is none to kill after a restart.
	group() (pgid int, leader string)
}

// procResult is how an attempt ended.
type procResult struct {
	exitCode int            // -1 when killed by a signal
	signaled bool           // ended by a signal
	sig      syscall.Signal // which one, when signaled
	stdout   string
	stderr   string
	dropped  int64 // output not passed on (ProcessResult.Dropped)
	ended    time.Time
}
