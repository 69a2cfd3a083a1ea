package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/config"
)

// The buffer writes what a plain buffer would hold for the same sections,
// forks and writes, over checkpoints that grow and shrink and so reuse the
// chunks of earlier ones: nothing of an earlier checkpoint shows through,
// and the forked parts come in their order however their writers
// interleave.
func TestSnapshotBufferMatchesPlainEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b snapshotBuffer
	for round, size := range []int{3 * snapChunk, 10 * snapChunk, snapChunk / 3, 7*snapChunk + 5, 0, 2 * snapChunk} {
		b.reset()
		var want bytes.Buffer
		for s := range 3 {
			name := fmt.Sprintf("sec%d", s)
			b.section(name)
			var body bytes.Buffer
			fill := func(w io.Writer, n int, tag byte) {
				for n > 0 {
					k := min(n, 1+rng.IntN(70_000))
					p := bytes.Repeat([]byte{tag + byte(round)}, k)
					p[0] = byte(k) // some variety inside each write
					w.Write(p)
					body.Write(p)
					n -= k
				}
			}
			fill(&b, size/4, 'a')
			if s != 1 {
				// Forked parts: written concurrently, they must come out
				// in order, before what b takes next.
				ws := b.Fork(3)
				parts := make([]bytes.Buffer, len(ws))
				var wg sync.WaitGroup
				for i, w := range ws {
					seed := rng.Uint64()
					wg.Go(func() {
						r := rand.New(rand.NewPCG(seed, uint64(i)))
						for n := size / 5; n > 0; {
							k := min(n, 1+r.IntN(50_000))
							p := bytes.Repeat([]byte{byte('k' + i)}, k)
							w.Write(p)
							parts[i].Write(p)
							n -= k
						}
					})
				}
				wg.Wait()
				for i := range parts {
					body.Write(parts[i].Bytes())
				}
			}
			fill(&b, size/4, 'z')
			b.end()
			want.Write(binary.AppendUvarint(nil, uint64(len(name))))
			want.WriteString(name)
			want.Write(binary.AppendUvarint(nil, uint64(body.Len())))
			want.Write(body.Bytes())
		}
		var got bytes.Buffer
		if _, err := b.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		if b.Len() != want.Len() || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("round %d (size %d): buffer holds %d bytes (Len %d), want %d; equal: %v",
				round, size, got.Len(), b.Len(), want.Len(), bytes.Equal(got.Bytes(), want.Bytes()))
		}
	}
}

// What reserve made ready before a checkpoint's pause is all the copy
// takes: no chunk is allocated under the pause, in a plain section or a
// forked one, until the copy outgrows the reservation.
func TestSnapshotBufferReserveCoversTheCopy(t *testing.T) {
	var b snapshotBuffer
	const n = 5*snapChunk + 123
	b.reset()
	b.reserve(n)
	made := b.made
	if made != 6 {
		t.Fatalf("reserve(%d) made %d chunks, want 6", n, made)
	}
	b.section("bus")
	b.Write(make([]byte, snapChunk+7))
	ws := b.Fork(2)
	ws[0].Write(make([]byte, 2*snapChunk))
	ws[1].Write(make([]byte, snapChunk))
	b.end()
	if b.made != made {
		t.Fatalf("the copy allocated %d chunks beyond the reservation", b.made-made)
	}
	b.section("more") // past the reservation: chunks are made as needed
	b.Write(make([]byte, 3*snapChunk))
	b.end()
	if b.made == made {
		t.Fatal("a copy larger than the reservation made no chunk")
	}
	// The next checkpoint reuses everything: reserving every chunk made so
	// far makes nothing.
	b.reset()
	made = b.made
	b.reserve(made * snapChunk)
	if b.made != made {
		t.Fatalf("reserve after reset made %d chunks; the spare ones sufficed", b.made-made)
	}
	// A state that shrank lets the memory of its largest snapshot go.
	b.reserve(2 * snapChunk)
	if len(b.spare) > 4 {
		t.Fatalf("after reserving 2 chunks of %d spare, %d are kept", made, len(b.spare))
	}
}

// Issue 20: the first checkpoint after a restart reserves as much memory
// per task as the snapshot the process started from took, not the lower
// bound a process with no snapshot guesses, so that its pause allocates
// nothing. Tasks with three records each take about twice that bound.
func TestFirstCheckpointAfterRestartReservesEnough(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	cfg := config.Default()
	cfg.Data, cfg.Listen, cfg.Fsync = t.TempDir(), "127.0.0.1:0", "off"
	cfg.Limits.IngestPerSec = 0
	writeLog(t, cfg, 90_000, "lifecycle") // 30 000 tasks, pending, running, success
	s, undo := recoverServer(t, cfg, false)
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if c := s.lastCkpt.Load(); c.Bytes/c.Tasks <= 2*snapBytesPerTask {
		t.Fatalf("the snapshot takes %d bytes per task: the test needs tasks well over the first guess's %d", c.Bytes/c.Tasks, snapBytesPerTask)
	}
	undo.run()
	s, undo = recoverServer(t, cfg, false)
	defer undo.run()
	if s.recovery.Events != 0 {
		t.Fatalf("the restart replayed %d records; want a start from the snapshot alone", s.recovery.Events)
	}
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if grew := s.snapBuf.made - s.snapBuf.reserved; grew != 0 {
		t.Errorf("the first checkpoint after the restart allocated %d chunks under its pause", grew)
	}
}

// Issue 20: a checkpoint copies the bus's shards on every core into chunks
// it keeps for the next checkpoint. Two tenants' tasks, with IDs long
// enough that every snapshot spans many chunks, are checkpointed several
// times as they grow (snapshot_events), changed, and checkpointed once
// more at a clean stop; the restart replays nothing and shows every task
// of both tenants as it was.
func TestSnapshotAcrossChunksRestoresEveryTask(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	const perTenant, batch = 6000, 500
	d := newDeployment(t, false, newHook(t), deployOptions{config: "snapshot_every: 24h\nsnapshot_events: 2500\n"})
	d.start()
	id := func(tenant string, i int) string {
		return fmt.Sprintf("%s-%05d-%s", tenant, i, strings.Repeat("x", 100+i%140)) // under the 256-byte limit
	}
	post := func(tenant string, from int, status string, seq int) {
		var body strings.Builder
		body.WriteByte('[')
		for j := from; j < from+batch; j++ {
			if j > from {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"taskID":%q,"name":"job_%d","sequence":%d,"status":%q,"ts":1764000000000}`, id(tenant, j), j%9, seq, status)
		}
		body.WriteByte(']')
		var ans struct{ Accepted int }
		d.do(tenant, "POST", "/api/v1/events", body.String(), &ans, 200)
		if ans.Accepted != batch {
			t.Fatalf("%s: %d of %d events accepted", tenant, ans.Accepted, batch)
		}
	}
	var sys struct {
		Recovery   struct{ Events int64 } `json:"recovery"`
		Checkpoint struct {
			Taken int64
			Bytes int64
		} `json:"checkpoint"`
	}
	taken := func() int64 {
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Checkpoint.Taken
	}
	// The checkpoint loop takes a snapshot once 2 500 records were logged
	// since the last one's copy: after each 3 000 records the test waits
	// for it, so the next 3 000 are sure to bring the next one.
	want := int64(0)
	for i := 0; i < perTenant; i += batch {
		for _, tenant := range tenants {
			post(tenant, i, "pending", 1)
		}
		if (i/batch)%3 == 2 {
			want++
			eventually(t, 0, fmt.Sprintf("checkpoint %d, by the count of records", want), func() bool { return taken() >= want })
		}
	}
	for _, tenant := range tenants { // some runs go on after the snapshots
		post(tenant, 1000, "running", 2)
	}
	list := func(tenant string) map[string]string {
		got := map[string]string{}
		cursor := ""
		for {
			var page apiclient.TaskPage
			d.do(tenant, "GET", "/api/v1/tasks?limit=1000&cursor="+url.QueryEscape(cursor), "", &page, 200)
			for _, task := range page.Tasks {
				if task.Tenant != tenant {
					t.Fatalf("%s sees task %s of tenant %q", tenant, task.TaskID, task.Tenant)
				}
				got[task.TaskID] = string(task.Status)
			}
			if page.Next == "" {
				return got
			}
			cursor = page.Next
		}
	}
	// Four checkpoints were taken by the count of records, each one reusing
	// the chunks of the one before, the last over many chunks.
	if taken(); sys.Checkpoint.Taken < 4 || sys.Checkpoint.Bytes < 8*snapChunk {
		t.Fatalf("before the stop: %d checkpoints, the latest %d bytes; want 4 or more, over %d bytes", sys.Checkpoint.Taken, sys.Checkpoint.Bytes, 8*snapChunk)
	}
	before := map[string]map[string]string{}
	for _, tenant := range tenants {
		before[tenant] = list(tenant)
		if len(before[tenant]) != perTenant {
			t.Fatalf("%s: %d tasks before the stop, want %d", tenant, len(before[tenant]), perTenant)
		}
	}
	d.api.term(t)
	d.start()
	d.do("", "GET", "/api/v1/system", "", &sys, 200)
	if sys.Recovery.Events != 0 {
		t.Errorf("the restart replayed %d records; the stop's snapshot should hold everything", sys.Recovery.Events)
	}
	for _, tenant := range tenants {
		after := list(tenant)
		if len(after) != len(before[tenant]) {
			t.Errorf("%s: %d tasks after the restart, want %d", tenant, len(after), len(before[tenant]))
		}
		for id, st := range before[tenant] {
			if after[id] != st {
				t.Fatalf("%s: task %.20s… is %q after the restart, was %q", tenant, id, after[id], st)
			}
		}
	}
}

// readSnapshot takes any bytes without panicking, and reads back exactly
// what writeSnapshot wrote: each known section gets its own bytes, an
// unknown one is skipped, a missing one is not called.
func FuzzReadSnapshotSections(f *testing.F) {
	f.Add([]byte("\x03bus\x02hi\x07metrics\x00"), []byte("abc"), []byte(""), uint8(0))
	f.Add([]byte("\x03bus\x09hi"), []byte{}, bytes.Repeat([]byte{7}, 300), uint8(3))
	f.Add([]byte("\x05other\x01x"), []byte("state"), []byte("more"), uint8(1))
	f.Fuzz(func(t *testing.T, raw, a, b []byte, drop uint8) {
		got := map[string][]byte{}
		reader := func(name string) func(io.Reader) error {
			return func(r io.Reader) error {
				data, err := io.ReadAll(r)
				got[name] = data
				return err
			}
		}
		secs := []section{{name: "bus", read: reader("bus")}, {name: "metrics", read: reader("metrics")}, {name: "expect", read: reader("expect")}}
		_ = readSnapshot(bytes.NewReader(raw), secs) // must not panic

		// Round trip: sections "bus" and "metrics" with contents a and b,
		// plus one this version does not know; drop leaves one out.
		contents := map[string][]byte{"bus": a, "extra": []byte("later version"), "metrics": b}
		var write []section
		for i, name := range []string{"bus", "extra", "metrics"} {
			if int(drop)%4 == i {
				delete(contents, name)
				continue
			}
			write = append(write, section{name: name, write: func(w io.Writer) error { _, err := w.Write(contents[name]); return err }})
		}
		var buf snapshotBuffer
		if err := writeSnapshot(&buf, write); err != nil {
			t.Fatal(err)
		}
		var enc bytes.Buffer
		buf.WriteTo(&enc)
		clear(got)
		if err := readSnapshot(&enc, secs); err != nil {
			t.Fatalf("reading back: %v", err)
		}
		for _, name := range []string{"bus", "metrics", "expect"} {
			want, ok := contents[name]
			if data, called := got[name]; called != ok || !bytes.Equal(data, want) {
				t.Fatalf("section %s: read %q (called %v), want %q (present %v)", name, data, called, want, ok)
			}
		}
	})
}
