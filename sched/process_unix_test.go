//go:build unix

package sched

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// lockedBuffer is a bytes.Buffer that two output goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// brokenWriter fails every write, like a closed terminal.
type brokenWriter struct{ calls int }

func (b *brokenWriter) Write([]byte) (int, error) { b.calls++; return 0, errors.New("broken pipe") }

func waitProcess(t *testing.T, p *Process) ProcessResult {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(wait):
		p.Signal(syscall.SIGKILL)
		t.Fatal("process did not end")
	}
	select {
	case <-p.Passed():
	case <-time.After(wait):
		t.Fatal("the output was not passed on")
	}
	return p.Result()
}

func TestStartProcess(t *testing.T) {
	t.Parallel()
	t.Run("output passed through and kept", func(t *testing.T) {
		t.Parallel()
		var out, errs lockedBuffer
		p, err := StartProcess(ProcessSpec{
			Argv: []string{"sh", "-c", `seq 1 30; echo "$GREETING" >&2; exit 3`},
			Env:  []string{"GREETING=hello from env"}, Stdout: &out, Stderr: &errs,
		})
		if err != nil {
			t.Fatal(err)
		}
		res := waitProcess(t, p)
		if res.ExitCode != 3 || res.Signaled {
			t.Errorf("exit %d signaled %v, want 3", res.ExitCode, res.Signaled)
		}
		if got := strings.Count(out.String(), "\n"); got != 30 {
			t.Errorf("passed through %d lines of stdout, want all 30", got)
		}
		if !strings.HasPrefix(res.StdoutTail, "11\n") || !strings.HasSuffix(res.StdoutTail, "30\n") {
			t.Errorf("stdout tail %q, want lines 11 to 30", res.StdoutTail)
		}
		if errs.String() != "hello from env\n" || res.StderrTail != "hello from env\n" {
			t.Errorf("stderr %q, tail %q", errs.String(), res.StderrTail)
		}
	})
	t.Run("a failing writer does not stop the process", func(t *testing.T) {
		t.Parallel()
		bw := &brokenWriter{}
		// 200 KiB is more than a pipe holds: had the reading stopped at
		// the first failed write, the process would block forever.
		p, err := StartProcess(ProcessSpec{Argv: []string{"sh", "-c", `head -c 204800 /dev/zero; echo end`}, Stdout: bw})
		if err != nil {
			t.Fatal(err)
		}
		res := waitProcess(t, p)
		if res.ExitCode != 0 || !strings.HasSuffix(res.StdoutTail, "end\n") {
			t.Errorf("exit %d, tail ends %q", res.ExitCode, res.StdoutTail[max(0, len(res.StdoutTail)-10):])
		}
		if bw.calls != 1 {
			t.Errorf("the broken writer was called %d times, want once", bw.calls)
		}
	})
	t.Run("signal to the group", func(t *testing.T) {
		t.Parallel()
		var out lockedBuffer
		ready := make(chan struct{})
		p, err := StartProcess(ProcessSpec{Argv: []string{"sh", "-c", `echo ready; exec sleep 60`}, Stdout: writerFunc(func(b []byte) {
			if strings.Contains(string(b), "ready") {
				close(ready)
			}
			out.Write(b)
		})})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ready:
		case <-time.After(wait):
			t.Fatal("not ready")
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		res := waitProcess(t, p)
		if !res.Signaled || res.Signal != syscall.SIGTERM || res.ExitCode != -1 {
			t.Errorf("got %+v, want ended by SIGTERM", res)
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("signalling a finished process: %v", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		if _, err := StartProcess(ProcessSpec{Argv: []string{"/nonexistent/apollo-test"}}); err == nil {
			t.Error("started a command that does not exist")
		}
		if _, err := StartProcess(ProcessSpec{}); err == nil {
			t.Error("started an empty command")
		}
	})
}

// writerFunc adapts a function to io.Writer for one test.
type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

func TestEncodeExtraFits(t *testing.T) {
	t.Parallel()
	// Quotes and control bytes grow when escaped: 2 KiB of them is far
	// more than 4 KiB of JSON.
	noisy := strings.Repeat("\"\x01\n", 700)
	raw := EncodeExtra(map[string]any{"exitCode": 1}, noisy, noisy)
	if len(raw) > apollo.MaxExtraBytes {
		t.Fatalf("%d bytes, over the limit", len(raw))
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["exitCode"] != float64(1) || m["stderrTail"] == nil {
		t.Fatalf("decoded %v, %v", m, err)
	}
}

// BenchmarkOutputPath compares what a run's output costs per pipe read
// with and without passing it on (apollo exec's relay), side by side.
func BenchmarkOutputPath(b *testing.B) {
	chunk := bytes.Repeat([]byte("a line of build output, as a chatty job writes it\n"), 80) // ~4 KiB, one pipe read
	b.Run("tail only", func(b *testing.B) {
		t := new(tail)
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		for b.Loop() {
			t.Write(chunk)
		}
	})
	b.Run("tail and pass on", func(b *testing.B) {
		t, rl := new(tail), newRelay(io.Discard, nil, make(chan struct{}))
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		for b.Loop() {
			t.Write(chunk)
			rl.put(chunk)
		}
		close(rl.chunks)
		<-rl.passed
	})
}
