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
	"sync"
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
		if dir := os.Getenv("APOLLO_TEST_HOLD_FAILED"); dir != "" {
			testHoldLive = holdFailed(dir)
		}
		if dir := os.Getenv("APOLLO_TEST_HOLD_FINDINGS"); dir != "" {
			testFindings = holdFindings(dir).see
		}
		if dir := os.Getenv("APOLLO_TEST_HOLD_SEND"); dir != "" {
			testHoldSend = holdSend(dir).hold
		}
		if dir := os.Getenv("APOLLO_TEST_HOLD_CHECK"); dir != "" {
			testCheckingExpectations = holdCheck(dir).check
		}
		if dir := os.Getenv("APOLLO_TEST_HOLD_LOCK"); dir != "" {
			testHoldLock = holdLock(dir).hold
		}
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
	cmd.Env = append(append(os.Environ(), "APOLLO_TEST_MAIN=1"), cmd.Env...) // the command's own last: they win
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
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
	startedMu.Lock()
	if started[t] == nil { // runs after the test's own cleanups (logOnFailure)
		t.Cleanup(func() { startedBy(t) })
	}
	started[t] = append(started[t], p)
	startedMu.Unlock()
	return p
}

// started are the processes each test started, in order, those it killed
// included: a failed test's log shows the end of each (logOnFailure).
var (
	startedMu sync.Mutex
	started   = map[*testing.T][]*proc{}
)

// startedBy returns the processes t started, and forgets them.
func startedBy(t *testing.T) []*proc {
	startedMu.Lock()
	defer startedMu.Unlock()
	ps := started[t]
	delete(started, t)
	return ps
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

// A channel or a limit for a tenant that no token has serves or limits
// nobody: the server says so at start, naming the key and the tenants the
// tokens have, and still starts (the rest of the configuration is good).
func TestConfigNamesATenantNoTokenHas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "apollo.yaml")
	hash := strings.Repeat("ab", 32)
	if err := os.WriteFile(cfg, []byte(`auth:
  tokens:
    - {name: a, role: admin, tenant: data-team, sha256: `+hash+`}
    - {name: b, role: admin, tenant: web, sha256: `+strings.Repeat("cd", 32)+`}
channels:
  team: {type: console, tenants: [data_team]}
  webs: {type: console, tenants: [web]}
limits:
  tenants:
    datateam: {tasks: 10}
    web: {tasks: 10}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startApollo(t, "server", "--config", cfg, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	p.kill()
	out := p.out.String()
	for _, want := range []string{
		`channels.team.tenants names tenant \"data_team\", which no token in auth.tokens has, so it applies to nobody (the tokens' tenants: \"data-team\", \"web\")`,
		`limits.tenants[\"datateam\"] names tenant \"datateam\"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the server's log has no %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "which no token"); n != 2 {
		t.Errorf("%d warnings about tenants, want 2:\n%s", n, out)
	}
}
