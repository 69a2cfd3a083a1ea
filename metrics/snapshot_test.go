package metrics_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
)

var snapNames = []string{"batch_a", "batch_b", "etl", "report", "x"}

// newIdle returns an Aggregator on a fake clock without the compaction
// loop, so that what it holds does not depend on goroutine timing.
func newIdle(t testing.TB) (*metrics.Aggregator, *apollo.FakeClock) {
	t.Helper()
	clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 678e6, time.UTC))
	a, err := metrics.New(metrics.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return a, clock
}

// fill gives a a day of history in two tenants, with corrections, and
// moves the clock so that compaction has run.
func fill(t testing.TB, a *metrics.Aggregator, clock *apollo.FakeClock, runs int) {
	t.Helper()
	for i, tn := range []string{"", "team-b"} {
		for _, c := range metricstest.Workload(uint64(10+i), tn, snapNames, runs, clock.Now(), 23*time.Hour, true) {
			a.Apply(&c)
		}
	}
	clock.Advance(40 * time.Minute)
	for _, c := range metricstest.Workload(12, "", snapNames, runs/10, clock.Now(), 10*time.Minute, true) {
		a.Apply(&c)
	}
}

func snapshot(t testing.TB, a *metrics.Aggregator) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := a.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sameAnswers checks that a and b answer every query alike.
func sameAnswers(t *testing.T, a, b *metrics.Aggregator, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, tn := range []string{"", "team-b", "nobody"} {
		for _, w := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, time.Hour, 2 * time.Hour, 24 * time.Hour} {
			for _, off := range []time.Duration{0, w, 3 * time.Hour} {
				q := metrics.Query{Tenant: tn, Window: w, Offset: off, Now: now}
				ta, errA := a.Table(ctx, q)
				tb, errB := b.Table(ctx, q)
				if errA != nil || errB != nil || !reflect.DeepEqual(ta.Names, tb.Names) || !reflect.DeepEqual(ta.Rows, tb.Rows) {
					t.Fatalf("Table(%+v) differs: %v %v\n%v %+v\n%v %+v", q, errA, errB, ta.Names, ta.Rows, tb.Names, tb.Rows)
				}
			}
		}
		for _, name := range snapNames {
			for _, s := range []struct{ w, step time.Duration }{{time.Hour, 10 * time.Second}, {24 * time.Hour, 5 * time.Minute}} {
				pa, _ := a.Series(ctx, tn, name, s.w, s.step, now)
				pb, _ := b.Series(ctx, tn, name, s.w, s.step, now)
				if !reflect.DeepEqual(pa, pb) {
					t.Fatalf("Series(%q, %q, %v, %v) differs", tn, name, s.w, s.step)
				}
			}
			if ra, rb := a.Rolling(tn, name), b.Rolling(tn, name); ra != rb {
				t.Fatalf("Rolling(%q, %q): %+v and %+v", tn, name, ra, rb)
			}
		}
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.Names != sb.Names || sa.Buckets != sb.Buckets || sa.Rollups != sb.Rollups {
		t.Fatalf("Stats differ: %+v and %+v", sa, sb)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	fill(t, a, clock, 2000)
	data := snapshot(t, a)
	b, err := metrics.New(metrics.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReadSnapshot(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, a, b, clock.Now())
	if again := snapshot(t, b); !bytes.Equal(again, data) {
		t.Errorf("a restored aggregator writes a different snapshot: %d bytes, was %d", len(again), len(data))
	}
	// Both carry on alike: the restored state is live, not a copy.
	more := metricstest.Workload(99, "team-b", snapNames, 300, clock.Now(), 2*time.Hour, true)
	for i := range more {
		a.Apply(&more[i])
		b.Apply(&more[i])
	}
	clock.Advance(3 * time.Hour)
	sameAnswers(t, a, b, clock.Now())
	st := a.Stats()
	t.Logf("snapshot: %d bytes for %d jobs, %d buckets, %d rollups (%.1f bytes per entry)",
		len(data), st.Names, st.Buckets, st.Rollups, float64(len(data))/float64(st.Buckets+st.Rollups))
}

// A data directory written by the release before DueAgain (snapshot
// version 2, testdata/snapshot-v2.bin: fill(…, 200) on newIdle's clock)
// is read: every counter as this build counts it, DueAgain zero (the old
// release did not count it), so late_rate over those buckets reads
// Late / (Started + Missed) as it did then.
func TestSnapshotReadsVersion2(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/snapshot-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[4] != 2 {
		t.Fatalf("testdata/snapshot-v2.bin is version %d", data[4])
	}
	a, clock := newIdle(t)
	fill(t, a, clock, 200)
	b, _ := metrics.New(metrics.Options{Clock: clock})
	if err := b.ReadSnapshot(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	var again int64
	for _, tn := range []string{"", "team-b"} {
		q := metrics.Query{Tenant: tn, Window: 24 * time.Hour, Now: clock.Now()}
		ta, _ := a.Table(context.Background(), q)
		tb, _ := b.Table(context.Background(), q)
		if !reflect.DeepEqual(ta.Names, tb.Names) || len(tb.Rows) == 0 {
			t.Fatalf("tenant %q: jobs %v, want %v", tn, tb.Names, ta.Names)
		}
		for i := range ta.Rows {
			want := ta.Rows[i]
			again += want.DueAgain
			want.DueAgain = 0
			if tb.Rows[i] != want {
				t.Errorf("tenant %q job %q: read %+v, want %+v", tn, ta.Names[i], tb.Rows[i], want)
			}
		}
	}
	if again == 0 {
		t.Fatal("the workload has no missed run that started: the test shows nothing")
	}
	// What it reads it writes as version 3, and reads back alike.
	c, _ := metrics.New(metrics.Options{Clock: clock})
	if err := c.ReadSnapshot(bytes.NewReader(snapshot(t, b))); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, b, c, clock.Now())
}

// A snapshot inside a larger stream: ReadSnapshot reads exactly its bytes
// from an io.ByteReader, and also works from a plain io.Reader.
func TestSnapshotInStream(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	fill(t, a, clock, 50)
	r := bytes.NewReader(append(snapshot(t, a), "TAIL"...))
	b, _ := metrics.New(metrics.Options{Clock: clock})
	if err := b.ReadSnapshot(r); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "TAIL" {
		t.Errorf("after the snapshot the reader holds %q, want TAIL", rest)
	}
	c, _ := metrics.New(metrics.Options{Clock: clock})
	if err := c.ReadSnapshot(io.MultiReader(bytes.NewReader(snapshot(t, a)))); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, a, c, clock.Now())
}

// frame wraps content as WriteSnapshot does: magic, one chunk, the end
// mark, the checksum.
func frame(version byte, content []byte) []byte {
	b := []byte{'A', 'P', 'M', 'S', version}
	if len(content) > 0 {
		b = append(binary.AppendUvarint(b, uint64(len(content))), content...)
	}
	b = append(b, 0)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(content))
}

// handSnapshot encodes one tenant whose jobs are given in order, each with
// empty levels.
func handSnapshot(version byte, jobs ...string) []byte {
	b := []byte{0, 0, 1, 0} // horizons, one tenant named ""
	b = binary.AppendUvarint(b, uint64(len(jobs)))
	base := 12
	if version < 3 {
		base = 11 // no DueAgain
	}
	for _, j := range jobs {
		b = append(binary.AppendUvarint(b, uint64(len(j))), j...)
		for range 2 {
			b = append(b, make([]byte, base)...) // base
			b = append(b, 0)                     // no entries
		}
	}
	return frame(version, b)
}

func TestSnapshotErrors(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	fill(t, a, clock, 20)
	valid := snapshot(t, a)
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 0x10
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", "", "bad magic"},
		{"not ours", "hello world", "bad magic"},
		{"newer version", string(handSnapshot(4)), "version 4"},
		{"older version", string(handSnapshot(0)), "version 0"},
		{"damaged", string(flipped), "byte"},
		{"truncated", string(valid[:len(valid)-1]), "checksum"},
		{"chunk too long", string(append([]byte("APMS\x01"), binary.AppendUvarint(nil, 1<<21)...)), "over the limit"},
		{"chunk cut short", string(append([]byte("APMS\x01"), 200, 1, 1, 2, 3)), "chunk of 200 bytes"},
		{"count beyond the content", string(frame(1, []byte{0, 0, 100})), "more than the 0 bytes left"},
		{"trailing content", string(frame(1, []byte{0, 0, 0, 7})), "1 bytes after the last tenant"},
		{"jobs out of order", string(handSnapshot(1, "b", "a")), `job "a" after "b"`},
		{"job twice", string(handSnapshot(1, "a", "a")), "out of order"},
		{"name too long", string(handSnapshot(1, strings.Repeat("n", 5000))), "over the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := metrics.New(metrics.Options{Clock: clock})
			err := b.ReadSnapshot(strings.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "at byte") {
				t.Errorf("ReadSnapshot: %v; want an error saying %q at a byte offset", err, tc.want)
			}
		})
	}
	if err := a.ReadSnapshot(bytes.NewReader(flipped)); err == nil {
		t.Fatal("a damaged snapshot was read")
	}
	b, _ := metrics.New(metrics.Options{Clock: clock})
	if err := b.ReadSnapshot(bytes.NewReader(valid)); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, a, b, clock.Now()) // the failed read changed nothing
	// Every cut in the header and the first job, then a spread of cuts.
	for i := 0; i < len(valid); i += 1 + i/32 {
		if err := b.ReadSnapshot(bytes.NewReader(valid[:i])); err == nil {
			t.Fatalf("a snapshot cut at %d of %d bytes was read", i, len(valid))
		}
	}
}

// FuzzReadSnapshot: arbitrary bytes give an error or a state that answers
// queries and round-trips; never a panic or an allocation out of
// proportion to the input. Each input is also tried as the content of a
// valid frame, so the fuzzer reaches the parser's checks behind the CRC.
func FuzzReadSnapshot(f *testing.F) {
	clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	seed, _ := metrics.New(metrics.Options{Clock: clock})
	f.Add(snapshot(f, seed))
	fill(f, seed, clock, 8) // small: the fuzzer minimizes what it finds
	f.Add(snapshot(f, seed))
	f.Add(handSnapshot(1, "a", "b"))
	f.Add(handSnapshot(1, "b", "a"))
	f.Add([]byte("APMS\x01"))
	f.Add([]byte{0, 0, 1, 0, 1, 1, 'j', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 5, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, frame(1, data), frame(2, data)} {
			a, _ := metrics.New(metrics.Options{Clock: clock})
			if err := a.ReadSnapshot(bytes.NewReader(in)); err != nil {
				if !strings.HasPrefix(err.Error(), "metrics: read snapshot") || !strings.Contains(err.Error(), "at byte") {
					t.Fatalf("error without its place: %v", err)
				}
				continue
			}
			for _, w := range []time.Duration{time.Minute, 24 * time.Hour} {
				if tb, err := a.Table(context.Background(), metrics.Query{Window: w}); err == nil {
					tb.Sum(tb.Range(""))
				}
			}
			a.Stats()
			out := snapshot(t, a)
			b, _ := metrics.New(metrics.Options{Clock: clock})
			if err := b.ReadSnapshot(bytes.NewReader(out)); err != nil {
				t.Fatalf("a snapshot written from a read one does not read back: %v", err)
			}
			if again := snapshot(t, b); !bytes.Equal(again, out) {
				t.Fatal("writing a read snapshot twice gives different bytes")
			}
		}
	})
}

// SeriesSum is the jobs' Series added up, step by step, whatever the
// window reaches (buckets, rollups, both).
func TestSeriesSum(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	fill(t, a, clock, 2000)
	ctx := context.Background()
	for _, tn := range []string{"", "team-b", "nobody"} {
		for _, prefix := range []string{"", "batch_", "x", "nosuch"} {
			for _, s := range []struct{ w, step time.Duration }{{time.Hour, 10 * time.Second}, {6 * time.Hour, time.Minute}, {24 * time.Hour, 5 * time.Minute}} {
				got, err := a.SeriesSum(ctx, tn, prefix, s.w, s.step, clock.Now())
				if err != nil {
					t.Fatal(err)
				}
				var want []apollo.Point
				for _, name := range snapNames {
					if !strings.HasPrefix(name, prefix) {
						continue
					}
					pts, _ := a.Series(ctx, tn, name, s.w, s.step, clock.Now())
					if want == nil {
						want = pts
						continue
					}
					for i := range pts {
						want[i].Add(pts[i].Summary)
					}
				}
				if want == nil {
					want, _ = a.Series(ctx, tn, "nosuch", s.w, s.step, clock.Now())
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("SeriesSum(%q, %q, %v, %v) is not the sum of the jobs' series", tn, prefix, s.w, s.step)
				}
			}
		}
	}
	if _, err := a.SeriesSum(ctx, "", "", time.Hour, 7*time.Second, clock.Now()); err == nil {
		t.Error("a step that is not a multiple of 10s was accepted")
	}
}
