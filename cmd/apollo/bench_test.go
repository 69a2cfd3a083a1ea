package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/proccpu"
)

// BenchmarkServerIngest sends batches of 99 events (33 runs reporting
// pending, running, success), or one event per request, to the whole
// all-in-one server in this process — log, bus, metrics, alerting,
// stream — so a profile attributes every instruction of ingest. One op is
// one event; every answer must accept every event of its request.
func BenchmarkServerIngest(b *testing.B) {
	for _, c := range []struct {
		fsync string
		batch int
	}{{"off", 99}, {"batch", 99}, {"batch", 1}} {
		b.Run(fmt.Sprintf("fsync=%s/batch=%d", c.fsync, c.batch), func(b *testing.B) {
			benchIngest(b, c.fsync, c.batch)
		})
	}
}

func benchIngest(b *testing.B, fsync string, batch int) {
	cfg := config.Default()
	cfg.Data, cfg.Listen, cfg.Fsync = b.TempDir(), "127.0.0.1:0", fsync
	cfg.Limits.IngestPerSec = 0
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, cfg, serverDeps{log: slog.New(slog.DiscardHandler), ready: func(a string) { up <- a }})
	}()
	addr := <-up
	defer func() { cancel(); <-done }()
	url := "http://" + addr + "/api/v1/events"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// Event i of the run belongs to task i/3, whose three events go out in
	// order (in one request, or in three consecutive ones of the same
	// sender) under one job name.
	statuses := [3]string{"pending", "running", "success"}
	ts := time.Now().UnixMilli()
	event := func(buf []byte, i int) []byte {
		buf = fmt.Appendf(buf, `{"taskID":"r%d","name":"job_%d","sequence":%d,"status":"%s","ts":%d,"extra":{"host":"w1"}}`,
			i/3, i/3%10, i%3+1, statuses[i%3], ts)
		return buf
	}
	bodies := make([][]byte, b.N/batch+1)
	for r := range bodies {
		buf := []byte{'['}
		for i := range batch {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = event(buf, r*batch+i)
		}
		bodies[r] = append(buf, ']')
	}
	want := []byte(fmt.Sprintf(`"accepted":%d,`, batch))
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := proccpu.Used()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		// With one event per request a sender keeps a task's three events
		// to itself, so they arrive in order: it takes three bodies at once.
		var mine []int64
		n := 0
		var ans bytes.Buffer
		for pb.Next() {
			if n++; n < batch {
				continue
			}
			n = 0
			if len(mine) == 0 {
				take := int64(1)
				if batch == 1 {
					take = 3 // one task's three bodies: r, r+1, r+2
				}
				for r0, r := next.Add(take)-take, int64(0); r < take; r++ {
					mine = append(mine, r0+r)
				}
			}
			r := mine[0]
			mine = mine[1:]
			if r >= int64(len(bodies)) {
				continue // the last sender's task runs past b.N
			}
			resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[r]))
			if err != nil {
				b.Error(err)
				return
			}
			ans.Reset()
			ans.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Contains(ans.Bytes(), want) {
				b.Errorf("request %d answered %d: %s", r, resp.StatusCode, ans.Bytes())
				return
			}
		}
	})
	// CPU time moves less with the machine's load than wall time does; it
	// is the client's and the server's together (one process).
	b.ReportMetric(float64(proccpu.Used()-cpu0)/1e3/float64(b.N), "cpu-µs/event")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkServerRecovery replays a log of 200 000 events with no
// snapshot, as after a SIGKILL: open the stores and recover, as the
// server's start does. One op is one whole recovery; events/s is the
// replay rate (at least a million a second: docs/architecture.md,
// "Numbers we hold ourselves to").
// recoveryEvents sizes BenchmarkServerRecovery's log: the default keeps a
// run short; -recovery.events 1000000 is the million-event log.
var recoveryEvents = flag.Int("recovery.events", 200_000, "events in BenchmarkServerRecovery's log")

func BenchmarkServerRecovery(b *testing.B) {
	for _, mix := range []string{"pending", "lifecycle"} {
		b.Run(mix, func(b *testing.B) {
			cfg := config.Default()
			cfg.Data, cfg.Listen, cfg.Fsync = b.TempDir(), "127.0.0.1:0", "off"
			cfg.Limits.IngestPerSec, cfg.Limits.Tasks = 0, 10_000_000
			n := *recoveryEvents
			writeLog(b, cfg, n, mix)
			for _, mode := range []string{"seq", "par"} {
				b.Run(mode, func(b *testing.B) { benchRecover(b, cfg, int64(n), mode == "seq") })
			}
		})
	}
}

// benchRecover recovers the server of cfg, whose log holds n events, once
// per op: on one goroutine (seq) or in parallel.
func benchRecover(b *testing.B, cfg config.Config, n int64, seq bool) {
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration // the process's CPU in recovery, GC included
	for b.Loop() {
		cpu0 := proccpu.Used()
		s, undo := recoverServer(b, cfg, seq)
		if s.recovery.Events != n {
			b.Fatalf("replayed %d events, want %d", s.recovery.Events, n)
		}
		cpu += proccpu.Used() - cpu0
		undo.run()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n*int64(b.N)), "cpu-µs/event")
}

// writeLog runs a server that takes n events (each a new task's pending,
// or runs reporting pending, running, success) and stops it, then removes
// the snapshot its shutdown wrote, so that a start replays the whole log.
func writeLog(b testing.TB, cfg config.Config, n int, mix string) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, cfg, serverDeps{log: slog.New(slog.DiscardHandler), ready: func(a string) { up <- a }})
	}()
	url := "http://" + <-up + "/api/v1/events"
	now := time.Now().UnixMilli()
	for i := 0; i < n; i += 1000 {
		var buf bytes.Buffer
		buf.WriteByte('[')
		for j := i; j < min(i+1000, n); j++ {
			if j > i {
				buf.WriteByte(',')
			}
			id, seq, st := j, 1, "pending"
			if mix == "lifecycle" {
				id, seq, st = j/3, j%3+1, [3]string{"pending", "running", "success"}[j%3]
			}
			fmt.Fprintf(&buf, `{"taskID":"t%d","name":"job_%d","sequence":%d,"status":"%s","ts":%d}`, id, id%100, seq, st, now)
		}
		buf.WriteByte(']')
		resp, err := http.Post(url, "application/json", &buf)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("POST: %d", resp.StatusCode)
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(cfg.Data, "wal", "*.snap"))
	for _, f := range snaps {
		os.Remove(f)
	}
}

// BenchmarkCheckpointPause measures what a checkpoint holds decisions
// for: copying the state of a server that recovered -recovery.events
// tasks (one pending event each) into the snapshot buffer. One op is one
// checkpoint's pause; the snapshot is not written to disk.
func BenchmarkCheckpointPause(b *testing.B) {
	cfg, n := pendingLog(b)
	s, undo := recoverServer(b, cfg, false)
	defer undo.run()
	b.ReportAllocs()
	var size int
	rss0 := rssBytes(b)
	faults0 := minorFaults(b)
	for b.Loop() {
		buf := &s.snapBuf
		if err := s.bus.Checkpoint(func(uint64) error { return writeSnapshot(buf, s.sections()) }); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(minorFaults(b)-faults0)/float64(b.N), "faults/op")
	b.ReportMetric(float64(rssBytes(b)-rss0)/float64(n), "rss-growth-B/task")
	b.ReportMetric(float64(size)/float64(n), "snapshot-B/task")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/task")
}

// rssBytes is the process's resident set size, from /proc/self/statm.
func rssBytes(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Fatal(err)
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(data), &size, &rss); err != nil {
		b.Fatal(err)
	}
	return rss * int64(os.Getpagesize())
}

// BenchmarkSnapshotRestore measures a start from a snapshot of
// -recovery.events tasks (one pending event each) with nothing after it to
// replay: the snapshot's read and decode. One op is one start.
func BenchmarkSnapshotRestore(b *testing.B) {
	cfg, n := pendingLog(b)
	{
		s, undo := recoverServer(b, cfg, false)
		if err := s.checkpoint(); err != nil {
			b.Fatal(err)
		}
		undo.run()
	}
	b.ReportAllocs()
	faults0 := minorFaults(b)
	for b.Loop() {
		s, undo := recoverServer(b, cfg, false)
		if s.recovery.Events != 0 {
			b.Fatalf("replayed %d records after the snapshot, want 0", s.recovery.Events)
		}
		undo.run()
	}
	b.ReportMetric(float64(minorFaults(b)-faults0)/float64(b.N), "faults/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/task")
}

// recoverServer opens the server of cfg and recovers its state, on one
// goroutine when seq; undo.run closes it.
func recoverServer(b testing.TB, cfg config.Config, seq bool) (*server, *undoList) {
	b.Helper()
	s := &server{cfg: cfg, log: slog.New(slog.DiscardHandler), clock: apollo.SystemClock, console: io.Discard, seqReplay: seq}
	undo := new(undoList)
	if err := s.open(undo); err != nil {
		b.Fatal(err)
	}
	if err := s.recover(); err != nil {
		b.Fatal(err)
	}
	return s, undo
}

// pendingLog is the configuration of a server whose log holds
// -recovery.events pending events of new tasks, and that count.
func pendingLog(b *testing.B) (config.Config, int) {
	cfg := config.Default()
	cfg.Data, cfg.Listen, cfg.Fsync = b.TempDir(), "127.0.0.1:0", "off"
	cfg.Limits.IngestPerSec, cfg.Limits.Tasks = 0, 10_000_000
	writeLog(b, cfg, *recoveryEvents, "pending")
	return cfg, *recoveryEvents
}
