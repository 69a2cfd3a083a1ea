package wal

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"

	"github.com/apollo-11/apollo/internal/testwait"
)

func TestRoundTripAcrossSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentSize: 4096})
	// Small waited batches roll between flushes; one big unwaited batch
	// makes the flusher split a single buffer across segments.
	for i := 0; i < 300; i += 30 {
		appendRange(t, l, i, i+30)
	}
	appendRange(t, l, 300, 600)
	checkRecords(t, replayAll(t, l, 0), 0, 600)
	checkRecords(t, replayAll(t, l, 237), 237, 600)
	if got := replayAll(t, l, 600); len(got) != 0 {
		t.Fatalf("Replay(600) returned %d records, want none", len(got))
	}
	st := l.Stats()
	if st.Segments < 10 || st.Appends != 600 || st.LastLSN != 600 || st.DurableLSN != 600 {
		t.Fatalf("stats = %+v, want ≥10 segments, 600 appends, LSNs 600", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, dir)
	for i, s := range segs {
		offs := recordOffsets(t, s.path)
		if i < len(segs)-1 && segs[i+1].lsn != s.lsn+LSN(len(offs)) {
			t.Fatalf("segment %s holds %d records but the next starts at %d", s.path, len(offs), segs[i+1].lsn)
		}
		last := offs[len(offs)-1]
		if len(offs) > 1 && last >= 4096 {
			t.Fatalf("segment %s has a record starting at %d, past the 4096-byte limit", s.path, last)
		}
	}

	l = openT(t, Options{Dir: dir, SegmentSize: 4096})
	if l.LastLSN() != 600 {
		t.Fatalf("LastLSN after reopen = %d, want 600", l.LastLSN())
	}
	appendRange(t, l, 600, 650)
	checkRecords(t, replayAll(t, l, 0), 0, 650)
}

func TestSyncPolicies(t *testing.T) {
	t.Parallel()
	for _, policy := range []SyncPolicy{SyncBatch, SyncInterval, SyncOff} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			watch := &syncWatch{onSync: make(chan struct{}, 64)}
			clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir, Sync: policy, SyncInterval: time.Second, Clock: clock, hooks: watch.hooks()})
			lsn, err := l.Append(payload(0))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Wait(ctxT(t), lsn); err != nil {
				t.Fatal(err)
			}
			synced := LSN(watch.synced.Load())
			switch policy {
			case SyncBatch:
				if synced < lsn {
					t.Fatalf("Wait returned before LSN %d was fsynced (synced %d)", lsn, synced)
				}
			case SyncInterval, SyncOff:
				if synced != 0 || l.Stats().Syncs != 0 {
					t.Fatalf("%s: fsynced before the interval (synced LSN %d, stats %+v)", policy, synced, l.Stats())
				}
			}
			if policy == SyncInterval {
				if !clock.BlockUntil(1, testwait.Timeout(t)) {
					t.Fatal("the flusher never armed its sync ticker")
				}
				clock.Advance(time.Second)
				receive(t, watch.onSync, "the interval fsync")
				if got := LSN(watch.synced.Load()); got != lsn {
					t.Fatalf("after one interval the disk holds LSN %d, want %d", got, lsn)
				}
			}
			// Close flushes and fsyncs whatever the policy.
			for i := 1; i < 20; i++ {
				if _, err := l.Append(payload(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := LSN(watch.synced.Load()); got != 20 {
				t.Fatalf("after Close the disk holds LSN %d, want 20", got)
			}
			l = openT(t, Options{Dir: dir})
			checkRecords(t, replayAll(t, l, 0), 0, 20)
		})
	}
}

func TestGroupCommit(t *testing.T) {
	t.Parallel()
	watch := &syncWatch{}
	l := openT(t, Options{Dir: t.TempDir(), hooks: watch.hooks()})
	const goroutines, each = 32, 40
	ctx := ctxT(t)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lsns []LSN
		errs = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				lsn, err := l.Append(payload(g*each + i))
				if err == nil {
					err = l.Wait(ctx, lsn)
				}
				if err != nil {
					errs <- err
					return
				}
				// The watch learns what is on disk from the bytes written
				// and the fsyncs that returned, not from the log.
				if synced := LSN(watch.synced.Load()); synced < lsn {
					errs <- errors.New("Wait returned before its record was fsynced")
					return
				}
				mu.Lock()
				lsns = append(lsns, lsn)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(lsns)
	for i, lsn := range lsns {
		if lsn != LSN(i+1) {
			t.Fatalf("LSNs are not 1..%d: position %d holds %d", len(lsns), i, lsn)
		}
	}
	st := l.Stats()
	if st.Syncs >= st.Appends || st.Syncs != uint64(watch.syncs.Load()) {
		t.Fatalf("%d fsyncs for %d appends (watch saw %d): no group commit", st.Syncs, st.Appends, watch.syncs.Load())
	}
	t.Logf("%d appends by %d goroutines took %d fsyncs (%.1f records per fsync)",
		st.Appends, goroutines, st.Syncs, float64(st.Appends)/float64(st.Syncs))
}

func TestBackpressure(t *testing.T) {
	t.Parallel()
	watch := &syncWatch{gate: make(chan struct{}), blocked: make(chan struct{}, 1)}
	l := openT(t, Options{Dir: t.TempDir(), Sync: SyncOff, hooks: watch.hooks()})
	t.Cleanup(watch.release)
	// The flusher's first take holds at most 9 MiB; 9 more fill the buffer.
	const records = 20
	big := make([]byte, MaxRecordSize)
	done := make(chan LSN, 1)
	go func() { // fills the buffer while the flusher is stuck in Write
		var last LSN
		for i := range records {
			big[0] = byte(i)
			lsn, err := l.Append(big)
			if err != nil {
				t.Error(err)
				break
			}
			last = lsn
		}
		done <- last
	}()
	receive(t, watch.blocked, "an Append to block on a full buffer")
	select {
	case <-done:
		t.Fatal("the appender finished although the flusher was stuck")
	default:
	}
	watch.release()
	var last LSN
	select {
	case last = <-done:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the blocked Append never resumed")
	}
	if err := l.Wait(ctxT(t), last); err != nil || last != records {
		t.Fatalf("Wait(%d) = %v, want LSN %d durable", last, err, records)
	}
}

func TestWriteFailureFailsTheLog(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	for _, where := range []string{"write", "fsync"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			watch := &syncWatch{}
			l := openT(t, Options{Dir: t.TempDir(), hooks: watch.hooks()})
			appendRange(t, l, 0, 5)
			if where == "write" {
				watch.failWrite.Store(&boom)
			} else {
				watch.failSync.Store(&boom)
			}
			lsn, err := l.Append(payload(5))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Wait(ctxT(t), lsn); !errors.Is(err, boom) {
				t.Fatalf("Wait = %v, want the %s error", err, where)
			}
			if err := l.Wait(ctxT(t), 5); err != nil {
				t.Fatalf("Wait for a record durable before the failure = %v, want nil", err)
			}
			if _, err := l.Append(payload(6)); !errors.Is(err, boom) {
				t.Fatalf("Append after failure = %v, want the %s error", err, where)
			}
			if err := l.Sync(); !errors.Is(err, boom) {
				t.Fatalf("Sync after failure = %v", err)
			}
			if err := l.Close(); !errors.Is(err, boom) {
				t.Fatalf("Close after failure = %v", err)
			}
		})
	}
}

func TestAppendAndWaitErrors(t *testing.T) {
	t.Parallel()
	watch := &syncWatch{gate: make(chan struct{})}
	l := openT(t, Options{Dir: t.TempDir(), hooks: watch.hooks()})
	t.Cleanup(watch.release)

	if _, err := l.Append(nil); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Fatalf("Append(empty) = %v, want code %s", err, apollo.EINVALID)
	}
	_, err := l.Append(make([]byte, MaxRecordSize+1))
	if !errors.Is(err, ErrTooLarge) || apollo.ErrorCode(err) != apollo.ETOOLARGE || !strings.Contains(err.Error(), "1048577") {
		t.Fatalf("Append(too large) = %v, want ErrTooLarge naming the size", err)
	}
	if err := l.Wait(ctxT(t), 1); err == nil || !strings.Contains(err.Error(), "only 0 records") {
		t.Fatalf("Wait beyond the last LSN = %v, want an error", err)
	}
	lsn, err := l.Append(payload(0)) // the flusher stalls on the gate
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, lsn); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %v", err)
	}
	watch.release()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	if _, err := l.Append(payload(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := l.Wait(ctxT(t), lsn); err != nil {
		t.Fatalf("Wait after Close for a flushed record = %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
}

func TestOpenLocksTheDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open = %v, want an in-use error", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	openT(t, Options{Dir: dir})
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want string // in the error; "" for none
	}{
		{"defaults", Options{Dir: "x"}, ""},
		{"no dir", Options{}, "wal.dir"},
		{"bad policy", Options{Dir: "x", Sync: "sometimes"}, `unknown sync policy "sometimes"`},
		{"negative interval", Options{Dir: "x", SyncInterval: -time.Second}, "wal.sync_interval"},
		{"tiny segments", Options{Dir: "x", SegmentSize: 100}, "wal.segment_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.withDefaults().validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseSyncPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want SyncPolicy
		ok   bool
	}{
		{"", SyncBatch, true},
		{"batch", SyncBatch, true},
		{" Interval ", SyncInterval, true},
		{"OFF", SyncOff, true},
		{"always", "", false},
	}
	for _, tt := range tests {
		got, err := ParseSyncPolicy(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseSyncPolicy(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && apollo.ErrorCode(err) != apollo.EINVALID {
			t.Errorf("ParseSyncPolicy(%q) error code = %s", tt.in, apollo.ErrorCode(err))
		}
	}
}

func TestReplayWhileAppending(t *testing.T) {
	t.Parallel()
	l := openT(t, Options{Dir: t.TempDir(), SegmentSize: 8192, Sync: SyncOff})
	const total = 3000
	done := make(chan error, 1)
	go func() {
		for i := range total {
			lsn, err := l.Append(payload(i))
			if err == nil && i%100 == 99 {
				err = l.Wait(context.Background(), lsn)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		limit := l.DurableLSN()
		recs := replayAll(t, l, 0)
		if LSN(len(recs)) < limit {
			t.Fatalf("Replay returned %d records, but %d were durable when it started", len(recs), limit)
		}
		checkRecords(t, recs, 0, len(recs))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, replayAll(t, l, 0), 0, total)
}

// Replay reuses one buffer: its allocations do not grow with the records.
func TestReplayAllocatesNothingPerRecord(t *testing.T) { // not parallel: AllocsPerRun forbids it
	l := openT(t, Options{Dir: t.TempDir(), Sync: SyncOff})
	allocs := func(n LSN) float64 {
		return testing.AllocsPerRun(3, func() {
			if err := l.Replay(l.LastLSN()-n, func(LSN, []byte) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
	appendRange(t, l, 0, 10_000)
	few, many := allocs(100), allocs(10_000)
	if many > few || many > 20 {
		t.Fatalf("Replay allocations: %.0f for 100 records, %.0f for 10000", few, many)
	}
}
