package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

var quiet = slog.New(slog.DiscardHandler)

func openT(t *testing.T, o Options) *Log {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fileEntries reads every entry of the tenants' audit files in dir, each
// tenant's oldest file first, in time order.
func fileEntries(t *testing.T, dir string) []Entry {
	t.Helper()
	names, err := tenantFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for _, name := range names {
		out = append(out, entriesOf(t, dir, name)...)
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return a.At.Compare(b.At) })
	return out
}

// tenantPath is the path of a tenant's audit file i (0: the one written
// now).
func tenantPath(dir, tenant string, i int) string { return filePath(dir, tenantFileName(tenant), i) }

// serverEntries reads every entry of the server's own audit files in dir.
func serverEntries(t *testing.T, dir string) []Entry {
	t.Helper()
	return entriesOf(t, dir, serverFileName)
}

func entriesOf(t *testing.T, dir, name string) []Entry {
	t.Helper()
	var out []Entry
	for i := 10; i >= 0; i-- {
		f, err := os.Open(filePath(dir, name, i))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: %v in %q", f.Name(), err, sc.Text())
			}
			out = append(out, e)
		}
		f.Close()
	}
	return out
}

func actions(es []Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Action)
	}
	return strings.Join(s, " ")
}

func TestLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	l := openT(t, Options{Dir: dir, Entries: 3, Clock: clock})
	for i, a := range []string{"a1", "a2", "a3", "a4"} {
		clock.Advance(time.Second)
		l.Record(Entry{Tenant: "t", Actor: "ops", Action: a, Target: string(rune('0' + i))})
	}
	l.Record(Entry{Tenant: "other", Actor: "x", Action: "b"})
	got := l.List("t", 10)
	if actions(got) != "a4 a3 a2" {
		t.Fatalf("tenant t lists %q, want its 3 newest", actions(got))
	}
	if !got[0].At.Equal(time.Unix(1004, 0)) {
		t.Errorf("time %v", got[0].At)
	}
	if len(l.List("t", 1)) != 1 {
		t.Error("limit ignored")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(fileEntries(t, dir)); n != 5 {
		t.Errorf("file has %d entries, want 5 (memory forgets, the file does not)", n)
	}
}

// Two tenants and a flood of callers with no token: neither the flood nor
// the other tenant pushes out a tenant's entries, the flood becomes one
// entry per source with its count, and no field keeps the caller's 60 KB.
func TestFloodDoesNotEvictTenants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	l := openT(t, Options{Dir: dir, Entries: 5, Clock: clock})
	l.Record(Entry{Tenant: "a", Actor: "ops-a", Action: "task.correct", Target: "t1"})
	l.Record(Entry{Tenant: "a", Actor: "ops-a", Action: "alert.ack", Target: "al1"})
	for i := range 50 { // tenant b's own flood evicts only b's entries
		l.Record(Entry{Tenant: "b", Actor: "ops-b", Action: "silence.add", Target: fmt.Sprint(i)})
	}
	huge := "GET /api/v1/tasks/" + strings.Repeat("x", 60<<10)
	const flood = 10_500
	for i := range flood {
		l.RecordFailure(Entry{Actor: "?", Action: "auth.fail", Target: huge, Detail: "unknown token",
			Remote: fmt.Sprintf("10.0.0.%d:%d", i%3, 40000+i)})
	}
	if got := actions(l.List("a", 100)); got != "alert.ack task.correct" {
		t.Errorf("tenant a lists %q after the flood, want both of its entries", got)
	}
	if got := l.List("b", 100); len(got) != 5 || got[0].Target != "49" {
		t.Errorf("tenant b lists %d entries, newest %q; want its 5 newest", len(got), got[0].Target)
	}
	anon := l.List("", 100)
	total := 0
	for _, e := range anon {
		total += e.Count
		if e.Action != "auth.fail" || !strings.HasPrefix(e.Remote, "10.0.0.") || len(e.Target) > maxTarget {
			t.Errorf("failure entry %+v (target %d bytes)", e, len(e.Target))
		}
	}
	if len(anon) != 3 || total != flood {
		t.Fatalf("the default tenant sees %d failure entries counting %d, want 3 (one per source) counting %d", len(anon), total, flood)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"a", "b"} {
		st, err := os.Stat(tenantPath(dir, tenant, 0))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 64<<10 {
			t.Errorf("tenant %s's audit file is %d bytes after the flood", tenant, st.Size())
		}
	}
}

func TestFailuresPerSourcePerInterval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Unix(6000, 0) // on an interval boundary
	clock := apollo.NewFakeClock(start)
	l := openT(t, Options{Dir: dir, Clock: clock, FailureInterval: time.Minute, FailureSources: 2})
	fail := func(remote string) {
		l.RecordFailure(Entry{Actor: "?", Action: "auth.fail", Target: "GET /x", Detail: "no bearer token", Remote: remote})
	}
	fail("10.0.0.1:1")
	clock.Advance(10 * time.Second)
	fail("10.0.0.1:2")
	fail("[::1]:3")
	fail("10.0.0.9:4") // past FailureSources: counted with the other sources
	fail("10.0.0.8:4")
	if n := len(serverEntries(t, dir)); n != 0 {
		t.Fatalf("%d entries written before the interval ended", n)
	}
	if got := l.List("", 10); len(got) != 3 {
		t.Fatalf("shown before the interval ended: %+v, want 3 entries at once", got)
	}
	clock.Advance(time.Minute) // the next interval
	fail("10.0.0.1:5")
	want := []struct {
		remote string
		count  int
	}{{"10.0.0.1", 2}, {"::1", 1}, {otherSources, 2}}
	got := serverEntries(t, dir)
	if len(got) != len(want) {
		t.Fatalf("file holds %+v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].Remote != w.remote || got[i].Count != w.count {
			t.Errorf("entry %d: %s × %d, want %s × %d", i, got[i].Remote, got[i].Count, w.remote, w.count)
		}
	}
	if !got[0].At.Equal(start) || !got[0].Last.Equal(start.Add(10*time.Second)) {
		t.Errorf("first entry spans %v..%v, want the first and last failure's times", got[0].At, got[0].Last)
	}
	// The interval still open reaches the file at Close.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := serverEntries(t, dir); len(got) != 4 || got[3].Count != 1 {
		t.Errorf("after Close the file holds %+v", got)
	}
}

// An interval ends on the log's own ticker, with no further call.
func TestFailuresWrittenOnTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(6000, 0))
	ticked := make(chan struct{}, 1)
	l := openT(t, Options{Dir: dir, Clock: clock, afterTick: func() { ticked <- struct{}{} }})
	l.RecordFailure(Entry{Actor: "?", Action: "auth.fail", Remote: "10.1.1.1:5"})
	if !clock.BlockUntil(1, 10*time.Second) {
		t.Fatal("the flush loop armed no ticker")
	}
	clock.Advance(time.Minute)
	select {
	case <-ticked:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the flush loop did not tick within 10 s")
	}
	if got := serverEntries(t, dir); len(got) != 1 || got[0].Remote != "10.1.1.1" || got[0].Count != 1 {
		t.Fatalf("after the interval's end the file holds %+v", got)
	}
}

func TestCapFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in  string
		max int
	}{{"short", 10}, {strings.Repeat("é", 300), 100}, {strings.Repeat("x", 5000), 512}, {strings.Repeat("日本", 400), 128}} {
		got := capString(tc.in, tc.max)
		if len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("capString(%d bytes, %d) = %d bytes, valid UTF-8 %v", len(tc.in), tc.max, len(got), utf8.ValidString(got))
		}
		if len(tc.in) > tc.max && !strings.Contains(got, "bytes cut)") {
			t.Errorf("capString(%d bytes, %d) does not say it cut: %q", len(tc.in), tc.max, got)
		}
		if len(tc.in) <= tc.max && got != tc.in {
			t.Errorf("capString changed a short value: %q", got)
		}
	}
	l := NewMemory(5, nil)
	l.Record(Entry{Tenant: "a", Actor: strings.Repeat("a", 1000), Action: strings.Repeat("b", 1000),
		Target: strings.Repeat("c", 70_000), Detail: strings.Repeat("d", 70_000), Remote: strings.Repeat("e", 1000)})
	e := l.List("a", 1)[0]
	if len(e.Actor)+len(e.Action)+len(e.Target)+len(e.Detail)+len(e.Remote) > 3*maxShort+maxTarget+maxDetail {
		t.Errorf("an entry keeps %d bytes", len(e.Actor)+len(e.Action)+len(e.Target)+len(e.Detail)+len(e.Remote))
	}
}

func TestRotationBoundsTheFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	const limit, files = 4 << 10, 2
	l := openT(t, Options{Dir: dir, Clock: clock, FileBytes: limit, Files: files, Entries: 1000})
	for i := range 500 {
		clock.Advance(time.Second)
		l.Record(Entry{Tenant: "a", Actor: "ops", Action: "silence.add", Target: fmt.Sprintf("s%03d", i), Detail: strings.Repeat("z", 100)})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var total int64
	for i := 0; i <= files; i++ {
		st, err := os.Stat(tenantPath(dir, "a", i))
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		if st.Size() > limit {
			t.Errorf("%s is %d bytes, over the %d limit", st.Name(), st.Size(), limit)
		}
		total += st.Size()
	}
	if _, err := os.Stat(tenantPath(dir, "a", files+1)); !os.IsNotExist(err) {
		t.Errorf("a rotated file past the %d kept: %v", files, err)
	}
	got := fileEntries(t, dir)
	if last := got[len(got)-1]; last.Target != "s499" {
		t.Errorf("newest entry in the files is %q, want s499", last.Target)
	}
	// After a restart the list shows the newest entries, from the files.
	l = openT(t, Options{Dir: dir, Clock: clock, FileBytes: limit, Files: files})
	if shown := l.List("a", 3); len(shown) != 3 || shown[0].Target != "s499" || shown[2].Target != "s497" {
		t.Errorf("after reopening, tenant a lists %+v", shown)
	}
}

// What was recorded is listed again after a crash (no Close), per tenant;
// a line cut short by the crash is dropped and the next entry starts a
// line of its own. Entries an earlier release wrote to audit.jsonl for
// every tenant are listed for their tenants too.
func TestReopenAfterCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	l := openT(t, Options{Dir: dir, Clock: clock})
	l.Record(Entry{Tenant: "a", Actor: "ops-a", Action: "task.correct", Target: "t1"})
	l.Record(Entry{Tenant: "b", Actor: "ops-b", Action: "silence.add", Target: "s1"})
	crashed := t.TempDir() // the files as a kill -9 leaves them: nothing is buffered
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	cut := `{"at":"2026-01-01T00:00:00Z","tenant":"a","act`
	f, err := os.OpenFile(tenantPath(crashed, "a", 0), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cut)
	f.Close()
	older := `{"at":"1970-01-01T00:15:00Z","tenant":"b","actor":"ops-b","action":"rules.update"}` + "\n"
	if err := os.WriteFile(pathOf(crashed, 1), []byte(older), 0o600); err != nil {
		t.Fatal(err)
	}
	l2 := openT(t, Options{Dir: crashed, Clock: clock})
	if got := l2.List("a", 10); len(got) != 1 || got[0].Target != "t1" {
		t.Errorf("tenant a after the crash: %+v", got)
	}
	if got := actions(l2.List("b", 10)); got != "silence.add rules.update" {
		t.Errorf("tenant b after the crash lists %q, want its entry and the one of the older release's file", got)
	}
	l2.Record(Entry{Tenant: "a", Actor: "ops-a", Action: "alert.ack", Target: "x"})
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := actions(entriesOf(t, crashed, tenantFileName("a"))); got != "task.correct alert.ack" {
		t.Errorf("tenant a's file after the crash and one more entry: %q", got)
	}
}

// When the disk has less free space than the reserve for the write-ahead
// log, entries stay in memory and are not written; the first entry written
// afterwards is a gap entry that counts them.
func TestReserveKeepsTheDiskForTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	var logs bytes.Buffer // written by Record, on this goroutine: the clock never ticks
	var mu sync.Mutex
	avail := uint64(1 << 30)
	space := func(string) (uint64, uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		return avail, 100 << 20, nil // a 100 MiB disk: 10 MiB reserved
	}
	l := openT(t, Options{Dir: dir, Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil)), space: space})
	setAvail := func(n uint64) { mu.Lock(); avail = n; mu.Unlock() }
	l.Record(Entry{Tenant: "a", Actor: "ops", Action: "a1"})
	setAvail(10<<20 - 1)
	for i := range 3 {
		l.Record(Entry{Tenant: "a", Actor: "ops", Action: fmt.Sprintf("low%d", i)})
	}
	if got := actions(fileEntries(t, dir)); got != "a1" {
		t.Fatalf("with the disk under the reserve the file got %q", got)
	}
	if got := actions(l.List("a", 10)); got != "low2 low1 low0 a1" {
		t.Errorf("memory holds %q", got)
	}
	if n := strings.Count(logs.String(), "audit: entries are not written"); n != 1 {
		t.Errorf("logged %d times, want once: %s", n, logs.String())
	}
	setAvail(11 << 20)
	l.Record(Entry{Tenant: "a", Actor: "ops", Action: "a2"})
	got := fileEntries(t, dir)
	if actions(got) != "a1 audit.gap a2" || got[1].Count != 3 || !strings.Contains(got[1].Detail, "kept for the write-ahead log") {
		t.Fatalf("file after space came back: %+v", got)
	}
	if shown := l.List("", 10); len(shown) != 1 || shown[0].Action != "audit.gap" {
		t.Errorf("the default tenant sees %+v, want the gap", shown)
	}
}

// FuzzOpen feeds arbitrary bytes as the audit file: Open never fails or
// panics on its content, what it lists is within the field limits, and
// the next entry is read back whole after a reopen.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","tenant":"a","actor":"x","action":"a"}` + "\n"))
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","actor":"?","action":"auth.fail","count":-5}` + "\n{\"at\":"))
	f.Add([]byte("not json\n\n\x00\xff"))
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","tenant":"a","target":"` + strings.Repeat("y", 2000) + `"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(pathOf(dir, 0), data, 0o600); err != nil {
			t.Fatal(err)
		}
		clock := apollo.NewFakeClock(time.Unix(1000, 0))
		l, err := Open(Options{Dir: dir, Clock: clock, Logger: quiet})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		for _, tenant := range []string{"", "a"} {
			for _, e := range l.List(tenant, 100) {
				if len(e.Target) > maxTarget || len(e.Detail) > maxDetail || len(e.Actor) > maxShort || e.Count < 0 {
					t.Fatalf("listed %+v", e)
				}
			}
		}
		l.Record(Entry{Tenant: "fuzz", Actor: "ops", Action: "after"})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(Options{Dir: dir, Clock: clock, Logger: quiet})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l.Close()
		if got := l.List("fuzz", 10); len(got) != 1 || got[0].Action != "after" {
			t.Fatalf("the entry after the fuzzed content reads back as %+v", got)
		}
	})
}

// Every tenant's file name is one a filesystem takes (no separator, at
// most 255 bytes), names that tenant alone even where case does not count,
// and reads back as the tenant.
func TestTenantFileNames(t *testing.T) {
	t.Parallel()
	tenants := []string{"acme", "Acme", "ACME", "a-b_c", "../etc", "a/b", "tenant-x.jsonl", ".", "東京",
		"x" + strings.Repeat("é", 63), strings.Repeat("z", 128), "a b"}
	seen := map[string]string{}
	for _, tenant := range tenants {
		name := tenantFileName(tenant)
		if strings.ContainsAny(name, "/\\\x00") || len(name)+len(".3") > 255 || name == fileName || name == serverFileName {
			t.Errorf("tenant %q: file name %q", tenant, name)
		}
		if other, dup := seen[strings.ToLower(name)]; dup {
			t.Errorf("tenants %q and %q share the file name %q (case aside)", other, tenant, name)
		}
		seen[strings.ToLower(name)] = tenant
		if back, ok := tenantOfFile(name); !ok || back != tenant {
			t.Errorf("tenant %q: file %q reads back as %q, %v", tenant, name, back, ok)
		}
	}
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	for _, tenant := range tenants {
		l.Record(Entry{Tenant: tenant, Actor: "ops", Action: "silence.add", Target: tenant})
	}
	l.Close()
	l = openT(t, Options{Dir: dir})
	for _, tenant := range tenants {
		if got := l.List(tenant, 10); len(got) != 1 || got[0].Target != tenant {
			t.Errorf("tenant %q lists %+v after a reopen", tenant, got)
		}
	}
}
