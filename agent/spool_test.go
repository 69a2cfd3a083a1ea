package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

func spoolFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+spoolExt))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// cycle reports the i-th step (1-based) of a run that goes pending,
// running, manual_blocked and round again: legal for as long as needed.
func cycle(run *Task, i int) error {
	switch i % 3 {
	case 1:
		return run.Pending()
	case 2:
		return run.Running()
	}
	return run.Block()
}

// firstArrivals returns, per task, the sequences in the order they first
// reached the server, from the requests not yet taken by the test.
func firstArrivals(srv *protocolServer) map[string][]int64 {
	seen := map[string]bool{}
	out := map[string][]int64{}
	for len(srv.requests) > 0 {
		for _, e := range (<-srv.requests).events {
			if key := fmt.Sprint(e.TaskID, "#", e.Sequence); !seen[key] {
				seen[key] = true
				out[e.TaskID] = append(out[e.TaskID], e.Sequence)
			}
		}
	}
	return out
}

func TestSpoolKeepsEventsOfAProcessThatExitsDuringAnOutage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.down()
	c1 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithClock(apollo.NewFakeClock(t0)))
	a, b := c1.Task("a", "job"), c1.Task("b", "job")
	a.Pending()
	a.Running()
	b.Running()
	// The server is down and the fake clock never moves: Close must not
	// wait for a retry, it writes the events to disk.
	if err := c1.Close(context.Background()); err != nil {
		t.Fatalf("Close during an outage: %v", err)
	}
	if st := c1.Stats(); st.Spooled != 3 || st.Dropped != 0 || st.SpoolBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
	if files := spoolFiles(t, dir); len(files) == 0 {
		t.Fatal("no spool file written")
	}

	srv.up()
	c2 := newTestClient(t, srv.URL(), WithSpoolDir(dir))
	c2.Task("c", "job").Running()
	if err := c2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(srv.requests) > 0 {
		for _, e := range (<-srv.requests).events {
			order = append(order, fmt.Sprint(e.TaskID, e.Sequence))
		}
	}
	if want := []string{"a1", "a2", "b1", "c1"}; !slices.Equal(order, want) {
		t.Fatalf("server got %v, want the spooled events first: %v", order, want)
	}
	if st := c2.Stats(); st.Accepted != 4 || st.Duplicate != 0 {
		t.Fatalf("stats %+v", st)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left after everything was answered: %v", files)
	}
}

func TestSpoolResendsAreAnsweredDuplicate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.setHang(true) // store the events, then never answer
	c1 := newTestClient(t, srv.URL(), WithSpoolDir(dir))
	for i := range 5 {
		c1.Task(fmt.Sprint("t", i), "").Running()
	}
	ctx, cancel := context.WithCancel(context.Background())
	closed := async(func() error { return c1.Close(ctx) })
	<-srv.hanging
	cancel() // the process gives up on the answer and exits
	if err := wait(t, closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := c1.Stats(); st.Spooled != 5 || st.Accepted != 0 {
		t.Fatalf("first process: %+v", st)
	}

	srv.release()
	c2 := newTestClient(t, srv.URL(), WithSpoolDir(dir))
	if err := c2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c2.Stats(); st.Duplicate != 5 || st.Accepted != 0 {
		t.Fatalf("second process: %+v, want 5 duplicates", st)
	}
	if n := srv.storedCount(); n != 5 {
		t.Fatalf("server stored %d events, want each of 5 once", n)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

// TestSpoolOverflowAndSpillKeepOrder fills memory while the server is down
// so that events overflow to disk, lets the outage last until the events
// the sender holds are spilled too, and checks that the next process sends
// every event in the order it was reported, although the spilled events
// reached disk after the overflowed ones.
func TestSpoolOverflowAndSpillKeepOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.down()
	fc := apollo.NewFakeClock(t0)
	hook, waits := retryWaits()
	c1 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithClock(fc), WithBatchSize(2), WithBufferSize(4), noJitter, hook)
	run := c1.Task("x", "job")
	cycle(run, 1)
	cycle(run, 2)
	d := nextWait(t, waits) // events 1 and 2 are with the sender
	for i := 3; i <= 10; i++ {
		if err := cycle(run, i); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	// 3..6 filled memory; 7 overflowed them all to disk, 8..10 followed.
	if st := c1.Stats(); st.Spooled != 8 || st.Buffered != 2 {
		t.Fatalf("after overflow: %+v", st)
	}
	flushed := flushAsync(c1)
	// Backoff 100ms, 200ms, ... : the wait that would carry the outage
	// past spoolAfter (5s) starts by spilling the two held events to disk,
	// which satisfies Flush.
	var waited time.Duration
	for c1.Stats().Spooled < 10 {
		if waited > 5*time.Second {
			t.Fatalf("no spill after %v of outage: %+v", waited, c1.Stats())
		}
		fc.Advance(d)
		waited += d
		d = nextWait(t, waits)
	}
	if waited+d < 5*time.Second || waited >= 5*time.Second {
		t.Fatalf("spilled after %v with a %v wait ahead; want the wait that crosses 5s", waited, d)
	}
	if err := wait(t, flushed); err != nil {
		t.Fatal(err)
	}
	if st := c1.Stats(); st.Spooled != 10 || st.Buffered != 0 {
		t.Fatalf("after spill: %+v", st)
	}
	files := spoolFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("spool files %v, want the overflow file and the spilled one", files)
	}
	closeNow(t, c1, 0)

	srv.up()
	c2 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithBatchSize(3))
	if err := c2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := firstArrivals(srv)["x"]; !slices.Equal(got, ints(1, 10)) {
		t.Fatalf("first arrivals %v, want 1..10", got)
	}
	if got := srv.storedFor("x"); !slices.Equal(got, ints(1, 10)) {
		t.Fatalf("stored %v", got)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

func TestSpoolSendsThenReturnsToMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.down()
	hook, waits := retryWaits()
	fc := apollo.NewFakeClock(t0)
	c := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithClock(fc), WithBatchSize(1), WithBufferSize(1), noJitter, hook)
	run := c.Task("y", "")
	cycle(run, 1)
	nextWait(t, waits)
	for i := 2; i <= 4; i++ {
		cycle(run, i) // 2 in memory, 3 overflows 2 and itself, 4 follows
	}
	srv.up()
	fc.Advance(backoffBase)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Caught up: the spool is empty and new events stay in memory.
	cycle(run, 5)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Spooled != 3 || st.Accepted != 5 {
		t.Fatalf("stats %+v", st)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
	if got := srv.storedFor("y"); !slices.Equal(got, ints(1, 5)) {
		t.Fatalf("stored %v", got)
	}
}

func TestSpoolLimitGivesBufferFull(t *testing.T) {
	t.Parallel()
	srv := newProtocolServer(t)
	srv.down()
	hook, waits := retryWaits()
	limit := Option(func(c *config) { c.spoolLimit = 300 })
	c := newTestClient(t, srv.URL(), WithSpoolDir(t.TempDir()), WithClock(apollo.NewFakeClock(t0)),
		WithBatchSize(1), WithBufferSize(1), hook, limit)
	run := c.Task("z", "")
	cycle(run, 1)
	nextWait(t, waits)
	var err error
	n := 1
	for err == nil && n < 100 {
		n++
		err = cycle(run, n)
	}
	if !errors.Is(err, ErrBufferFull) || !strings.Contains(err.Error(), "spool size limit") {
		t.Fatalf("event %d: %v, want ErrBufferFull for the spool limit", n, err)
	}
	st := c.Stats()
	if st.Dropped != 1 || st.SpoolBytes > 300 || st.SpoolBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
	// What memory holds cannot be spilled to a full spool: Close says so.
	closeNow(t, c, st.Buffered)
}

// TestSpoolLimitCountsOtherTokensFiles: the limit bounds what the
// directory holds on disk. Files another token left there (a program
// moved to another tenant, a token rotated) take room too: a client that
// counted only its own could fill the disk past the limit by as much as
// they hold.
func TestSpoolLimitCountsOtherTokensFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := filepath.Join(dir, spoolName(1, 0, tokenTag("another tenant's token")))
	line := `{"taskID":"theirs","sequence":1,"status":"running","ts":1764400000001}` + "\n"
	if err := os.WriteFile(other, []byte(strings.Repeat(line, 3)), 0o600); err != nil { // 228 bytes
		t.Fatal(err)
	}
	srv := newProtocolServer(t)
	srv.down()
	hook, waits := retryWaits()
	limit := Option(func(c *config) { c.spoolLimit = 300 })
	c := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("mine"), WithClock(apollo.NewFakeClock(t0)),
		WithBatchSize(1), WithBufferSize(1), hook, limit)
	run := c.Task("z", "")
	cycle(run, 1)
	nextWait(t, waits)
	var err error
	n := 1
	for err == nil && n < 100 {
		n++
		err = cycle(run, n)
	}
	if !errors.Is(err, ErrBufferFull) {
		t.Fatalf("event %d: %v, want ErrBufferFull for the spool limit", n, err)
	}
	onDisk := func() int64 {
		var n int64
		for _, f := range spoolFiles(t, dir) {
			info, err := os.Stat(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			n += info.Size()
		}
		return n
	}
	if st := c.Stats(); onDisk() > 300 || st.SpoolBytes != onDisk() {
		t.Fatalf("%d bytes on disk (stats say %d), over the limit of 300", onDisk(), st.SpoolBytes)
	}
	// Close spills what memory holds while it fits, and no more.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Close(ctx)
	if n := onDisk(); n > 300 {
		t.Fatalf("%d bytes on disk after Close, over the limit of 300", n)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != strings.Repeat(line, 3) {
		t.Fatalf("the other token's file was changed: %q, %v", b, err)
	}
}

func TestSpoolSkipsATornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := `{"taskID":"torn","sequence":1,"status":"running","ts":1764400000001}` + "\n"
	torn := `{"taskID":"torn","sequence":2,"sta`
	if err := os.WriteFile(filepath.Join(dir, spoolName(7, 0, "")), []byte(good+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not ours"), 0o600)
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL(), WithSpoolDir(dir))
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Accepted != 1 || st.Dropped != 1 {
		t.Fatalf("stats %+v, want the whole line sent and the torn one dropped", st)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("a file that is not a spool file was touched: %v", err)
	}
}

func TestSpoolDirIsForOneClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c1, err := New("http://127.0.0.1:1", WithSpoolDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New("http://127.0.0.1:1", WithSpoolDir(dir+"/.")); apollo.ErrorCode(err) != apollo.ECONFLICT {
		t.Fatalf("second client on one dir: %v", err)
	}
	c1.Close(context.Background())
	c2, err := New("http://127.0.0.1:1", WithSpoolDir(dir))
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	c2.Close(context.Background())
}

func TestSpoolNames(t *testing.T) {
	t.Parallel()
	for _, k := range [][2]uint64{{0, 0}, {1, 0}, {1, 1}, {1<<64 - 1, 0xffff}} {
		for _, tag := range []string{"", tokenTag("t")} {
			maj, mnr, got, ok := parseSpoolName(spoolName(k[0], k[1], tag))
			if !ok || maj != k[0] || mnr != k[1] || got != tag {
				t.Errorf("round trip of %v %q: %d %d %q %v", k, tag, maj, mnr, got, ok)
			}
		}
	}
	tag := tokenTag("")
	if !slices.IsSorted([]string{spoolName(0, 5, tag), spoolName(1, 0, tag), spoolName(1, 1, tag), spoolName(2, 0, tag), spoolName(16, 0, tag)}) {
		t.Error("names do not sort in sending order")
	}
	for _, bad := range []string{"x.ndjson", "0000000000000001-0000.json", "000000000000001-0000.ndjson", "000000000000000g-0000.ndjson",
		"0000000000000001-0000-abc.ndjson", "0000000000000001-0000-000000000000000g.ndjson", "0000000000000001-0000-0000000000000000-x.ndjson"} {
		if _, _, _, ok := parseSpoolName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSpoolSendsEventsOnlyWithTheirToken: a program moved to another
// tenant (a new token) on the same spool directory must not send the
// events it spooled for the first tenant into the second; they wait for
// their own token.
func TestSpoolSendsEventsOnlyWithTheirToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.down()
	a := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tenant-a-token"), WithClock(apollo.NewFakeClock(t0)))
	a.Task("a-run", "job").Running()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Spooled != 1 {
		t.Fatalf("tenant a: %+v", st)
	}

	srv.up()
	b := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tenant-b-token"))
	b.Task("b-run", "job").Running()
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for len(srv.requests) > 0 {
		r := <-srv.requests
		for _, e := range r.events {
			if e.TaskID == "a-run" {
				t.Fatalf("tenant a's spooled event was sent with %q", r.auth)
			}
		}
	}
	if st := b.Stats(); st.Accepted != 1 {
		t.Fatalf("tenant b: %+v, want its own event only", st)
	}
	if files := spoolFiles(t, dir); len(files) != 1 {
		t.Fatalf("spool files %v, want tenant a's file kept", files)
	}

	a2 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tenant-a-token"))
	if err := a2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := srv.next(t)
	if len(r.events) != 1 || r.events[0].TaskID != "a-run" || r.auth != "Bearer tenant-a-token" {
		t.Fatalf("tenant a's next client sent %+v", r)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

// TestSpoolOfAnyTokenSendsARetiredTokensEvents: an operator whose token
// was rotated hands the events spooled under the old one to the new one
// (apollo spool send --from): with WithSpoolOfAnyToken the client sends
// them with its own token and deletes them once taken.
func TestSpoolOfAnyTokenSendsARetiredTokensEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.down()
	old := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("old-token"), WithClock(apollo.NewFakeClock(t0)))
	old.Task("old-run", "job").Running()
	if err := old.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.up()
	successor := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("new-token"), WithSpoolOfAnyToken())
	if err := successor.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := srv.next(t)
	if len(r.events) != 1 || r.events[0].TaskID != "old-run" || r.auth != "Bearer new-token" {
		t.Fatalf("the successor sent %+v", r)
	}
	if st := successor.Stats(); st.Accepted != 1 {
		t.Fatalf("successor: %+v", st)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

// TestSpoolKeepsEventsTheServerRefusedTheTokenFor: a token refused (401,
// 403: revoked, or its role changed), or an address with no events route
// (404, or 405 from Apollo-11 itself: a wrong base URL, a proxy not
// routing yet), must not cost the events already in the spool, nor those
// in memory: they wait on disk and go out once the server takes them.
func TestSpoolKeepsEventsTheServerRefusedTheTokenFor(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			srv := newProtocolServer(t)
			srv.down()
			c1 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tok-a"), WithClock(apollo.NewFakeClock(t0)))
			c1.Task("earlier", "job").Running()
			if err := c1.Close(context.Background()); err != nil {
				t.Fatal(err)
			}

			srv.up()
			srv.failNext(3, status, 0) // the token is refused for a while
			hook, waits := retryWaits()
			c2 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tok-a"), WithClock(apollo.NewFakeClock(t0)), hook)
			c2.Task("later", "job").Running()
			if r := srv.next(t); r.status != status {
				t.Fatalf("first answer %d", r.status)
			}
			// Kept, the events wait for a retry; lost, Flush has nothing
			// left to wait for.
			select {
			case <-waits:
			case <-flushAsync(c2):
			case <-time.After(testwait.Timeout(t)):
				t.Fatal("neither a retry nor the end of Flush")
			}
			closeNow(t, c2, 0)
			if st := c2.Stats(); st.Rejected != 0 || st.Dropped != 0 {
				t.Fatalf("after HTTP %d: %+v, want nothing rejected or dropped", status, st)
			}
			if files := spoolFiles(t, dir); len(files) == 0 {
				t.Fatalf("after HTTP %d the spool is empty: the events are lost", status)
			}

			srv.mu.Lock()
			srv.script = nil // the server takes the token again
			srv.mu.Unlock()
			c3 := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken("tok-a"))
			if err := c3.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := [][]int64{srv.storedFor("earlier"), srv.storedFor("later")}; len(got[0]) != 1 || len(got[1]) != 1 {
				t.Fatalf("stored %v, want both runs' events once the token is taken", got)
			}
		})
	}
}

// TestSpoolSkipsOnlyTheDamagedLine: a spool file damaged in its middle
// (a run of NUL bytes longer than the reader's chunk, as a crash can
// leave on some file systems, or a line of junk) cost every event after
// it: the reader took a chunk without a newline for a torn tail and
// skipped the rest of the file. Events after the damage were spooled,
// and must be sent; only the damaged line is dropped.
func TestSpoolSkipsOnlyTheDamagedLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line := func(seq int) string {
		status := []string{"pending", "running", "manual_blocked", "pending"}[seq-1]
		return fmt.Sprintf(`{"taskID":"damaged","sequence":%d,"status":%q,"ts":1764400000001}`+"\n", seq, status)
	}
	junk := strings.Repeat("\x00", 3*readChunk/2) + "\n"
	body := line(1) + junk + line(2) + line(3) + strings.Repeat("x", 2*readChunk) + "\n" + line(4)
	if err := os.WriteFile(filepath.Join(dir, spoolName(7, 0, "")), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newProtocolServer(t)
	c := newTestClient(t, srv.URL(), WithSpoolDir(dir))
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Accepted+st.Duplicate != 4 || st.Dropped != 2 {
		t.Fatalf("stats %+v, want the 4 whole events sent and the 2 damaged lines dropped", st)
	}
	if got := srv.storedFor("damaged"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("stored %v, want [1 2 3 4]", got)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

// FuzzSpoolRead: whatever a spool file holds, the reader ends, and it
// reads exactly the whole lines that are JSON and no longer than its
// chunk, in order: damage costs the damaged lines, never the others.
func FuzzSpoolRead(f *testing.F) {
	f.Add([]byte(`{"a":1}` + "\n" + `{"b":2}` + "\n"))
	f.Add([]byte(`{"a":1}` + "\n" + `{"b":`))
	f.Add([]byte("\x00\x00\n{}\n"))
	f.Add([]byte(strings.Repeat("\x00", readChunk+10) + "\n{}\n"))
	f.Add([]byte("{}\n" + strings.Repeat("{", readChunk) + "\n[]\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, spoolName(1, 0, "")), body, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openSpool(dir, "", false, 1<<40, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		var want []string
		lines := strings.Split(string(body), "\n")
		for _, l := range lines[:len(lines)-1] { // the last is no whole line
			if len(l) < readChunk && json.Valid([]byte(l)) {
				want = append(want, l)
			}
		}
		var got []string
		for range len(body) + 1 {
			items, _, err := s.read(nil, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) == 0 && s.firstUnread() == nil {
				break
			}
			for _, it := range items {
				got = append(got, string(it.data))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read %d lines %.200q, want %d %.200q", len(got), got, len(want), want)
		}
	})
}

// FuzzParseSpoolName: a name parses only if it is the one spoolName
// writes for what it parses to; any other file in the directory is left
// alone. (Upper-case hex parsed: such a file, which no client writes, was
// taken for another token's and announced as such.)
func FuzzParseSpoolName(f *testing.F) {
	for _, n := range []string{spoolName(1, 0, ""), spoolName(1<<64-1, 0xffff, tokenTag("t")), "x.ndjson",
		"000000000000000A-0000.ndjson", "0000000000000001-0000-ABCDEF0123456789.ndjson", "0000000000000001-0000-.ndjson"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		major, minor, tag, ok := parseSpoolName(name)
		if ok && (spoolName(major, minor, tag) != name || strings.ToLower(tag) != tag) {
			t.Fatalf("%q parsed as %d %d %q, which is named %q", name, major, minor, tag, spoolName(major, minor, tag))
		}
	})
}
