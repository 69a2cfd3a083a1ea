package wal

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apollo-11/apollo/internal/proccpu"
)

// BenchmarkAppend measures acknowledged events per second under each
// policy: every parallel appender appends one ~100-byte record and waits
// until it is durable, as the bus does for one HTTP event. GOMAXPROCS×16
// appenders stand in for concurrent HTTP clients.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []SyncPolicy{SyncBatch, SyncInterval, SyncOff} {
		b.Run(string(policy), func(b *testing.B) {
			l := openT(b, Options{Dir: b.TempDir(), Sync: policy})
			p := payload(40) // 100 bytes
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lsn, err := l.Append(p)
					if err == nil {
						err = l.Wait(ctx, lsn)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportThroughput(b, l)
		})
	}
}

// BenchmarkAppendOneWriter is the baseline without group commit: a single
// appender under the batch policy pays one fsync per event.
func BenchmarkAppendOneWriter(b *testing.B) {
	l := openT(b, Options{Dir: b.TempDir()})
	p := payload(40)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		lsn, err := l.Append(p)
		if err == nil {
			err = l.Wait(ctx, lsn)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	reportThroughput(b, l)
}

// BenchmarkAppendBatch100 is the HTTP batch shape: one client appends 100
// records and waits for the last, under the default batch policy.
func BenchmarkAppendBatch100(b *testing.B) {
	l := openT(b, Options{Dir: b.TempDir()})
	p := payload(40)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var lsn LSN
		for range 100 {
			var err error
			if lsn, err = l.Append(p); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Wait(ctx, lsn); err != nil {
			b.Fatal(err)
		}
	}
	reportThroughput(b, l)
}

func reportThroughput(b *testing.B, l *Log) {
	st := l.Stats()
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(st.Appends)/secs, "events/s")
	if st.Syncs > 0 && l.opts.Sync != SyncOff { // under off, the only fsyncs are at segment rolls
		b.ReportMetric(float64(st.Appends)/float64(st.Syncs), "events/fsync")
	}
}

// BenchmarkReplay measures recovery: replaying 1M records of 100 bytes
// from the page cache, checksums verified. The target is ≥ 1M records/s.
func BenchmarkReplay(b *testing.B) {
	const records = 1_000_000
	dir := b.TempDir()
	l := openT(b, Options{Dir: dir, Sync: SyncOff})
	p := payload(40)
	for range records {
		if _, err := l.Append(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	l = openT(b, Options{Dir: dir})
	b.SetBytes(records * int64(recHeaderSize+len(p)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := l.Replay(0, func(LSN, []byte) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != records {
			b.Fatalf("replayed %d records, want %d", n, records)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkSyncedWrite is the disk's side of the runway: the segment
// writer alone (no group commit), a 700-byte write and an fsync per op,
// into a file that grows with each write (how the log wrote before the
// runway; the writer's way on a disk with no room for one) and into one it
// fills ahead (how it writes now). The two side by side say what the
// runway saves on this machine's disk; cpu-µs/op counts the kernel's work
// for the fsync, which on a virtual machine is most of it.
func BenchmarkSyncedWrite(b *testing.B) {
	for _, c := range []struct {
		name   string
		runway bool
	}{{"grow", false}, {"runway", true}} {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "seg"))
			if err != nil {
				b.Fatal(err)
			}
			w := &segmentWriter{limit: math.MaxInt64}
			w.attach(f, 1, 0, 0)
			w.noRunway = !c.runway
			defer w.close()
			rec := appendRecord(nil, bytes.Repeat([]byte{'r'}, 692), 0)
			cpu0 := proccpu.Used()
			for b.Loop() {
				if err := w.write(rec, 1); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(proccpu.Used()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
