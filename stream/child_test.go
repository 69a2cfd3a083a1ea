package stream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/proccpu"
	"github.com/apollo-11/apollo/internal/testwait"
)

// The clients of a fanout case can run in a child process: the test
// binary again, running only TestFanoutChild, with the case in an
// environment variable. Then the server's process holds only the server
// side (its heap, its goroutines, its collections), and the numbers are
// closer to clients on other machines; the two processes still share the
// machine's cores.

const fanoutChildEnv = "APOLLO_FANOUT_CHILD"

// fanoutChildSpec is what the child is told: where to connect, the case,
// and the file to write its results to.
type fanoutChildSpec struct {
	URL      string `json:"url"`
	Clients  int    `json:"clients"`
	Changes  int    `json:"changes"`
	Coalesce bool   `json:"coalesce"`
	Watcher  bool   `json:"watcher"`
	Out      string `json:"out"`
}

func (s fanoutChildSpec) fanoutCase() fanoutCase {
	return fanoutCase{clients: s.Clients, changes: s.Changes, coalesce: s.Coalesce, watcher: s.Watcher}
}

// TestFanoutChild is the client side of BenchmarkFanout's child cases; it
// skips unless the benchmark started it. It writes its CPU time from "every
// client subscribed" to "every change read", then the UnixNano at which
// each change was read, as little-endian int64s.
func TestFanoutChild(t *testing.T) {
	raw := os.Getenv(fanoutChildEnv)
	if raw == "" {
		t.Skip("the clients of BenchmarkFanout's child cases: the benchmark runs this in a child process")
	}
	var spec fanoutChildSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("%s: %v", fanoutChildEnv, err)
	}
	fc := spec.fanoutCase()
	r := newFanoutRun(spec.URL, fc)
	conns := r.dialAll(t, fc)
	select {
	case <-r.ready:
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("%d of %d clients had the answer to subscribe", r.snapshots.Load(), r.clients)
	}
	cpu0 := proccpu.Used()
	select {
	case <-r.all:
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("clients received %d of %d changes", r.received.Load(), r.expected)
	}
	cpu := proccpu.Used() - cpu0
	for _, c := range conns {
		c.CloseNow()
	}
	r.readers.Wait()
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8*(1+len(r.recv))), uint64(cpu))
	for i := range r.recv {
		out = binary.LittleEndian.AppendUint64(out, uint64(r.recv[i].Load()))
	}
	if err := os.WriteFile(spec.Out, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fanoutChild is a running child process of clients.
type fanoutChild struct {
	cmd  *exec.Cmd
	out  string
	log  bytes.Buffer // its output; read only after it ended
	done chan error   // its end; nil once received
}

func startFanoutChild(tb testing.TB, url string, fc fanoutCase) *fanoutChild {
	c := &fanoutChild{out: filepath.Join(tb.TempDir(), "recv"), done: make(chan error, 1)}
	spec, _ := json.Marshal(fanoutChildSpec{URL: url, Clients: fc.clients, Changes: fc.changes,
		Coalesce: fc.coalesce, Watcher: fc.watcher, Out: c.out})
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestFanoutChild$", "-test.count=1", "-test.timeout=5m")
	c.cmd.Env = append(os.Environ(), fanoutChildEnv+"="+string(spec))
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	if err := c.cmd.Start(); err != nil {
		tb.Fatalf("starting the client process: %v", err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	return c
}

// wait waits for the child to finish and reads what it wrote.
func (c *fanoutChild) wait(tb testing.TB) (recv []int64, cpu time.Duration) {
	select {
	case err := <-c.done:
		c.done = nil
		if err != nil {
			tb.Fatalf("client process: %v\n%s", err, c.log.Bytes())
		}
	case <-time.After(testwait.Timeout(tb)):
		tb.Fatal("client process: still running, past the test's wait")
	}
	data, err := os.ReadFile(c.out)
	if err != nil || len(data) < 8 {
		tb.Fatalf("client process results: %v\n%s", err, c.log.Bytes())
	}
	cpu = time.Duration(binary.LittleEndian.Uint64(data))
	for data = data[8:]; len(data) >= 8; data = data[8:] {
		recv = append(recv, int64(binary.LittleEndian.Uint64(data)))
	}
	return recv, cpu
}

// kill ends the child if it is still running (the run failed) and waits
// for it.
func (c *fanoutChild) kill() {
	if c.done == nil {
		return
	}
	c.cmd.Process.Kill()
	<-c.done
	c.done = nil
}
