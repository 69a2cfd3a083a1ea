package wal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashDirEnv tells the test binary to act as the crash test's writer.
const crashDirEnv = "APOLLO_WAL_CRASH_DIR"

const (
	crashSegmentSize = 16 << 10
	crashStateSize   = 20_000
)

// TestCrashWriter is the child of TestCrashRecovery: four goroutines append,
// wait, and print "LSN payload-hex" for each acknowledged record, and one of
// them writes a snapshot now and then, until the parent kills the process.
func TestCrashWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the writer half of TestCrashRecovery; it runs only in that test's subprocess")
	}
	die := func(err error) {
		fmt.Fprintln(os.Stderr, "crash writer:", err)
		os.Exit(3)
	}
	l, err := Open(Options{Dir: dir, SegmentSize: crashSegmentSize, Logger: quiet})
	if err != nil {
		die(err)
	}
	var out sync.Mutex
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				p := fmt.Appendf(nil, "pid %d goroutine %d record %d %s", os.Getpid(), g, i, strings.Repeat("x", i%50))
				lsn, err := l.Append(p)
				if err == nil {
					err = l.Wait(context.Background(), lsn)
				}
				if err == nil && g == 0 && i%40 == 39 {
					err = l.WriteSnapshot(lsn, func(w io.Writer) error {
						_, err := w.Write(stateAt(lsn, crashStateSize))
						return err
					})
				}
				if err != nil {
					die(err)
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "%d %x\n", lsn, p) // one write call per line
				out.Unlock()
			}
		}()
	}
	select {} // until SIGKILL
}

// TestCrashRecovery proves "acknowledged = durable": it SIGKILLs a writer
// at a random moment, several times over one directory, and checks after
// each crash that every record the writer acknowledged is present and
// intact, or covered by the snapshot recovery starts from.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	t.Parallel()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	acked := map[LSN][]byte{}
	for round := range 6 {
		killAfter := 20 + rng.IntN(600)
		n := runCrashWriter(t, dir, killAfter, acked)
		snap, replayed, repaired := verifyAfterCrash(t, dir, acked)
		t.Logf("round %d: killed after %d acknowledgements (%d read in all); recovered from snapshot %d + %d records; repaired %d bytes",
			round, killAfter, n, snap, replayed, repaired)
	}
}

// runCrashWriter starts the writer, kills it after killAfter acknowledged
// lines, collects every complete line it printed into acked, and returns
// how many it read.
func runCrashWriter(t *testing.T, dir string, killAfter int, acked map[LSN][]byte) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriter$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	lines := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil { // EOF: a line cut by the kill has no newline and is dropped
			break
		}
		lsn, p := parseAck(t, line)
		if prev, ok := acked[lsn]; ok && !bytes.Equal(prev, p) {
			cmd.Process.Kill()
			t.Fatalf("LSN %d acknowledged twice: %q, then %q after a crash", lsn, prev, p)
		}
		acked[lsn] = p
		if lines++; lines == killAfter {
			cmd.Process.Kill() // SIGKILL: no deferred code, no flush
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer ended with %v before it was killed; stderr:\n%s", err, stderr.String())
	}
	return lines
}

func parseAck(t *testing.T, line string) (LSN, []byte) {
	t.Helper()
	lsnText, hexText, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	n, err := strconv.ParseUint(lsnText, 10, 64)
	p, herr := hex.DecodeString(hexText)
	if !ok || err != nil || herr != nil {
		t.Fatalf("bad line from the writer: %q", line)
	}
	return LSN(n), p
}

// verifyAfterCrash opens dir as recovery would and checks every
// acknowledged record against it.
func verifyAfterCrash(t *testing.T, dir string, acked map[LSN][]byte) (LSN, int, int64) {
	t.Helper()
	l, err := Open(Options{Dir: dir, SegmentSize: crashSegmentSize, Logger: quiet})
	if err != nil {
		t.Fatalf("Open after the crash: %v", err)
	}
	defer l.Close()
	snap, body := readLatest(t, l)
	if body != nil && !bytes.Equal(body, stateAt(snap, crashStateSize)) {
		t.Fatalf("snapshot %d has a %d-byte body that is not the one written", snap, len(body))
	}
	got := map[LSN][]byte{}
	next := snap + 1
	err = l.Replay(snap, func(lsn LSN, p []byte) error {
		if lsn != next {
			return fmt.Errorf("replay jumped from LSN %d to %d", next-1, lsn)
		}
		next++
		got[lsn] = bytes.Clone(p)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay from snapshot %d: %v", snap, err)
	}
	for lsn, p := range acked {
		if lsn > l.LastLSN() {
			t.Fatalf("acknowledged LSN %d is past the recovered log's end %d", lsn, l.LastLSN())
		}
		if lsn > snap && !bytes.Equal(got[lsn], p) {
			t.Fatalf("acknowledged LSN %d: recovered %q, want %q", lsn, got[lsn], p)
		}
	}
	return snap, len(got), l.Stats().Repaired
}
