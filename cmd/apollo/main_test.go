package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// TestMain lets tests run the binary as a subprocess: the test binary, with
// APOLLO_TEST_MAIN=1, behaves exactly as `apollo`.
func TestMain(m *testing.M) {
	if os.Getenv("APOLLO_TEST_MAIN") == "1" {
		os.Exit(Main())
	}
	os.Exit(m.Run())
}

// proc is `apollo` running as a subprocess.
type proc struct {
	cmd     *exec.Cmd
	addr    string
	out     *strings.Builder
	exited  chan struct{} // closed when the process has been waited for
	waitErr error
}

// startApollo runs the binary with args and waits for its "is up" line.
func startApollo(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProc(t, apiclient.ReadyPrefix, args...)
}

// startProc runs the binary with args and waits for a stdout line starting
// with ready; for the "is up" line it records the address.
func startProc(t *testing.T, ready string, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(os.Args[0], args...), ready)
}

// startCmd is startProc for a command that runs the binary in a wrapper
// (a shell, unshare).
func startCmd(t *testing.T, cmd *exec.Cmd, ready string) *proc {
	t.Helper()
	args := cmd.Args[1:]
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: &strings.Builder{}, exited: make(chan struct{})}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := apiclient.WatchReady(stdout, ready)
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	select {
	case p.addr = <-up:
	case <-p.exited:
		t.Fatalf("apollo %v exited before serving: %v\n%s", args, p.waitErr, p.out)
	case <-time.After(testwait.Timeout(t)):
		cmd.Process.Kill()
		t.Fatalf("apollo %v not up\n%s", args, p.out)
	}
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testCtx ends after d, or testwait's wait if that is longer: a loaded
// machine makes a test slower, not red.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), max(d, testwait.Timeout(t)))
	t.Cleanup(cancel)
	return ctx
}

var _ = fmt.Sprintf

// The collector settings in the configuration reach every process that
// keeps the task state: the Go collector's own gauges on /metrics show
// them. A scale-out node once ran on Go's defaults whatever they said.
func TestGCSettingsApplied(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"server", "bus --nats"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "apollo.yaml")
			if err := os.WriteFile(cfg, []byte("gc_percent: 150\nmemory_limit_mib: 300\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"server", "--data", filepath.Join(dir, "data")}
			if mode != "server" {
				args = []string{"bus", "--nats", startNATS(t).ClientURL(), "--partitions", "2", "--node-id", "gc-node"}
			}
			p := startApollo(t, append(args, "--config", cfg, "--listen", "127.0.0.1:0")...)
			resp, err := http.Get("http://" + p.addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{"go_gc_gogc_percent 150\n", "go_gc_gomemlimit_bytes " + strconv.FormatFloat(300<<20, 'g', -1, 64) + "\n"} {
				if !strings.Contains(string(body), want) {
					t.Errorf("/metrics has no %q", want)
				}
			}
		})
	}
}
