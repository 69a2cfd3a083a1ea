// Package harness is what the bench commands and drills share: building the
// apollo binary, running it as a real process on a fresh data directory,
// sampling its RSS, goroutines and open files, and summarising latencies.
package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// Build compiles ./cmd/apollo of the repository that holds this bench
// module into dir and returns the binary's path. root is the repository
// root ("..", from bench/).
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "apollo")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/apollo")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/apollo in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// BuildIfEmpty returns bin, or when it is empty builds ./cmd/apollo of
// this repository (as Build, from bench/) into a temporary directory that
// cleanup removes. who prefixes the progress line on stderr.
func BuildIfEmpty(ctx context.Context, bin, who string) (path string, cleanup func(), err error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "apollo-bench-"+who+"-bin-")
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintln(os.Stderr, who+": building apollo")
	if path, err = Build(ctx, "..", dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Proc is one running apollo process.
type Proc struct {
	Addr string // host:port it serves on ("" for processes without HTTP)
	Dir  string // its data directory
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error
}

// Options says how to start a process.
type Options struct {
	Args   []string // e.g. "server", "--fsync", "off"; --data and --listen are added for "server"
	Dir    string   // data directory; "" makes a fresh one under os.TempDir
	Config string   // apollo.yaml contents; written into Dir and passed with --config
	Env    []string // extra environment
	Ready  string   // stdout line prefix that says it is up; default apiclient.ReadyPrefix
	// ReadyURL, for a peer that prints no such line: the process is up
	// when a GET of http://Addr+ReadyURL answers 200. Addr must be set.
	ReadyURL string
	Addr     string // the address a peer was told to listen on (see FreeAddr)
	Wait     time.Duration
}

// Start runs bin with opts and waits for its ready line.
func Start(bin string, opts Options) (*Proc, error) {
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "apollo-bench-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	args := append([]string(nil), opts.Args...)
	if len(args) > 0 && args[0] == "server" {
		args = append(args, "--data", filepath.Join(dir, "data"))
		if !hasFlag(args, "--listen") {
			args = append(args, "--listen", "127.0.0.1:0")
		}
	}
	if opts.Config != "" {
		cfg := filepath.Join(dir, "apollo.yaml")
		if err := os.WriteFile(cfg, []byte(opts.Config), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config", cfg)
	}
	ready := opts.Ready
	if ready == "" {
		ready = apiclient.ReadyPrefix
	}
	wait := opts.Wait
	if wait == 0 {
		wait = 60 * time.Second
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Dir: dir, cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var up <-chan string
	if opts.ReadyURL != "" {
		ready := make(chan string, 1)
		go pollReady(opts.Addr, opts.ReadyURL, p.done, ready)
		go io.Copy(io.Discard, stdout)
		up = ready
	} else {
		up = apiclient.WatchReady(stdout, ready)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	select {
	case p.Addr = <-up:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s %v exited before it was up: %v\n%s", filepath.Base(bin), args, p.err, p.log.String())
	case <-time.After(wait):
		p.Kill()
		return nil, fmt.Errorf("%s %v not up within %v\n%s", filepath.Base(bin), args, wait, p.log.String())
	}
}

// pollReady sends addr to up once GET http://addr+path answers 200, and
// gives up when the process has exited (done closed).
func pollReady(addr, path string, done <-chan struct{}, up chan<- string) {
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := c.Get("http://" + addr + path); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				up <- addr
				return
			}
		}
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond): // polling a process we do not control, with Start's deadline
		}
	}
}

// FreeAddr is a loopback address with a port that was free a moment ago,
// for a peer that must be told where to listen.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// URL is the process's base URL.
func (p *Proc) URL() string { return "http://" + p.Addr }

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Log is what the process wrote to stderr so far.
func (p *Proc) Log() string { return p.log.String() }

// Kill sends SIGKILL to the process group and waits for it.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to d for a clean exit, then kills.
func (p *Proc) Stop(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.Kill()
		return errors.New("did not stop within " + d.String())
	}
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Remove deletes the data directory (after Kill or Stop).
func (p *Proc) Remove() { os.RemoveAll(p.Dir) }

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the head: start-up errors are there
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitCtx is a helper for drills: it returns ctx.Err() if ctx ends first.
func WaitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Poll checks cond every 100 ms until it holds or d passes: for a drill
// that watches a separate process's state by asking it.
func Poll(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// RedisURL is the Redis a drill or benchmark uses: APOLLO_TEST_REDIS, as
// the tests and CI set it, or else database 15 on the local server.
func RedisURL() string {
	return cmp.Or(os.Getenv("APOLLO_TEST_REDIS"), "redis://127.0.0.1:6379/15")
}
