//go:build unix

package sched

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// drainGrace bounds how long output is still read after a run's process
// group is gone. Only a process that left the group (setsid) can still hold
// the pipes then; the run does not wait for it. It is an I/O deadline on
// real pipes, so it uses real time.
const drainGrace = 2 * time.Second

// execRunner runs each attempt as a real process in its own process group,
// so that a timeout or a shutdown can signal the process and everything it
// started.
type execRunner struct{ clock apollo.Clock }

var _ runner = execRunner{}

func (r execRunner) start(spec *runSpec) (proc, error) {
	var files []*os.File // every pipe end; closed on failure
	pipe := func() (*os.File, *os.File, error) {
		rd, wr, err := os.Pipe()
		if err == nil {
			files = append(files, rd, wr)
		}
		return rd, wr, err
	}
	outR, outW, err1 := pipe()
	errR, errW, err2 := pipe()
	if err := errors.Join(err1, err2); err != nil {
		closeAll(files)
		return nil, fmt.Errorf("sched: output pipes: %w", err)
	}
	path, err := lookPath(spec.argv[0], spec.env)
	if err != nil {
		closeAll(files)
		return nil, err
	}
	cmd := exec.Command(path, spec.argv[1:]...)
	cmd.Args[0] = spec.argv[0]
	cmd.Env = append(os.Environ(), spec.env...)
	cmd.Dir = spec.dir
	// *os.File outputs are handed to the child as they are: no copying
	// goroutines inside exec, so Wait returns when the leader exits.
	cmd.Stdout, cmd.Stderr = outW, errW
	if spec.stdin != nil {
		cmd.Stdin = spec.stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll(files)
		return nil, err
	}
	outW.Close()
	errW.Close()
	p := &execProc{cmd: cmd, pgid: cmd.Process.Pid, leader: processIdentity(cmd.Process.Pid),
		doneC: make(chan struct{}), passedC: make(chan struct{})}
	gone := make(chan struct{}) // the group is gone: no more waiting on a reader of the output
	var readers sync.WaitGroup
	var relays []*relay
	for _, s := range []struct {
		r *os.File
		t *tail
		w io.Writer
	}{{outR, &p.out, spec.stdout}, {errR, &p.err, spec.stderr}} {
		readers.Add(1)
		if s.w == nil {
			go drain(&readers, s.r, s.t)
			continue
		}
		rl := newRelay(s.w, s.r, gone)
		relays = append(relays, rl)
		go func() { defer readers.Done(); rl.read(s.t) }()
	}
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState below
		// The run took until its process exited, not until its output
		// was read: a daemon holding that open adds up to drainGrace.
		ended := r.clock.Now()
		p.exitedC.Store(true)
		// A run ends with its leader: what it left behind in its group goes
		// too, so that no run leaks processes (docs/scheduler.md).
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		close(gone)
		deadline := time.Now().Add(drainGrace)
		_ = outR.SetReadDeadline(deadline)
		_ = errR.SetReadDeadline(deadline)
		readers.Wait()
		outR.Close()
		errR.Close()
		p.res = procResult{exitCode: -1, stdout: p.out.String(), stderr: p.err.String(), ended: ended}
		for _, rl := range relays {
			p.res.dropped += rl.dropped
		}
		if st := cmd.ProcessState; st != nil {
			p.res.exitCode = st.ExitCode()
			if ws, ok := st.Sys().(syscall.WaitStatus); ok {
				p.res.signaled = ws.Signaled()
				if p.res.signaled {
					p.res.sig = ws.Signal()
				}
			}
		}
		close(p.doneC)
		for _, rl := range relays {
			<-rl.passed
		}
		close(p.passedC)
	}()
	return p, nil
}

// lookPath finds the program of name as its environment would: in the
// PATH that env sets, if it sets one (a job's env: {PATH: ...}), else in
// the scheduler's own. A name with a slash is a path already; a directory
// of that PATH that is not absolute is passed over, as the working
// directory is no place to find programs in.
func lookPath(name string, env []string) (string, error) {
	path, set := envPath(env)
	switch {
	case strings.Contains(name, "/"):
		return name, nil // relative to the job's dir, as exec runs it
	case !set:
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in the PATH of the job's env (%s)", name, path)
}

// programProblem says what keeps name from starting as a job's program in
// dir with env, and what to do; "" when nothing does.
func programProblem(name, dir string, env []string) (problem, hint string) {
	if !strings.Contains(name, "/") {
		if _, err := lookPath(name, env); err != nil {
			return pathProblem(name, env), notFoundHint
		}
		return "", ""
	}
	p := name
	if dir != "" && !filepath.IsAbs(p) {
		p = filepath.Join(dir, p) // as exec runs it, in the job's dir
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%q does not exist", name), "correct the path, or install the program there; a relative path starts from the job's dir, or the scheduler's working directory"
	case err != nil:
		return fmt.Sprintf("%q cannot be run: %v", name, err), "the scheduler's user must be able to reach and run it"
	case fi.IsDir():
		return fmt.Sprintf("%q is a directory", name), "name the program to run"
	case fi.Mode()&0o111 == 0:
		return fmt.Sprintf("%q is not executable", name), "make it executable (chmod +x), or run it through its interpreter, like [/bin/sh, script.sh]"
	}
	return "", ""
}

// drain reads a stream that is not passed on into its tail, to EOF or
// the read deadline.
func drain(wg *sync.WaitGroup, r *os.File, t *tail) {
	defer wg.Done()
	_, _ = io.Copy(t, r)
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

type execProc struct {
	cmd      *exec.Cmd
	pgid     int
	leader   string // processIdentity of the process that leads the group
	out, err tail
	doneC    chan struct{}
	passedC  chan struct{} // closed when the output is passed on, after doneC
	exitedC  atomic.Bool   // the process was waited for
	res      procResult
}

func (p *execProc) signal(sig syscall.Signal) error {
	if p.exitedC.Load() {
		// The group was killed when its leader exited, and the leader is
		// reaped: its ID may be another group's by now.
		return nil
	}
	err := syscall.Kill(-p.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // the group is already gone
	}
	return err
}

func (p *execProc) done() <-chan struct{}   { return p.doneC }
func (p *execProc) exited() bool            { return p.exitedC.Load() || leaderGone(p.pgid, p.leader) }
func (p *execProc) passed() <-chan struct{} { return p.passedC }
func (p *execProc) group() (int, string)    { return p.pgid, p.leader }
func (p *execProc) result() procResult      { return p.res }
