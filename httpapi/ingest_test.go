package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
)

// postAnswer posts body to /api/v1/events and decodes the answer.
func postAnswer(t *testing.T, url, ctype, body string) (int, ingestAnswer) {
	t.Helper()
	resp, b := post(t, url+"/api/v1/events", ctype, body)
	var ans ingestAnswer
	json.Unmarshal(b, &ans)
	return resp.StatusCode, ans
}

// Issue 16.13: "\ud800" and "\udc00" both became U+FFFD, so two different
// task IDs were one task (the second answered duplicate). An ID with half
// a surrogate pair is refused; a whole pair is one character.
func TestLoneSurrogateIDsRefused(t *testing.T) {
	t.Parallel()
	srv, b := newTestServer(t, nil)
	code, ans := postAnswer(t, srv.URL, "application/json", `[`+
		`{"taskID":"run-\ud800","sequence":1,"status":"running","ts":1764400000000},`+
		`{"taskID":"run-\udc00","sequence":1,"status":"running","ts":1764400000000},`+
		`{"taskID":"run-x","name":"job-\udbff","sequence":1,"status":"running","ts":1764400000000},`+
		`{"taskID":"run-\ud83d\ude00","sequence":1,"status":"running","ts":1764400000000}]`)
	if code != 200 || len(ans.Results) != 4 {
		t.Fatalf("HTTP %d, %+v", code, ans)
	}
	for i, field := range []string{"taskID", "taskID", "name"} {
		if r := ans.Results[i]; r.Result != "rejected" || r.Error == nil || r.Error.Field != field || r.Error.Hint == "" {
			t.Errorf("event %d: %+v, want refused on %s with a hint", i, r, field)
		}
	}
	if r := ans.Results[3]; r.Result != "accepted" {
		t.Errorf("an escaped surrogate pair: %+v", r)
	}
	if _, err := b.Get("", "run-\U0001F600"); err != nil {
		t.Errorf("the run with an emoji: %v", err)
	}
	if _, err := b.Get("", "run-\uFFFD"); err == nil {
		t.Error("a lone surrogate became a task named with U+FFFD")
	}
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Issue 16.13: a gzip body was answered "400 malformed JSON". It is now
// read when Content-Encoding says gzip, with the body limit holding for the
// inflated bytes too; without the header it is refused with a hint.
func TestGzipBodies(t *testing.T) {
	t.Parallel()
	srv, b := newTestServer(t, nil)
	events := "{\"taskID\":\"gz-1\",\"sequence\":1,\"status\":\"running\",\"ts\":1764400000000}\n{\"taskID\":\"gz-2\",\"sequence\":1,\"status\":\"pending\",\"ts\":1764400000000}\n"
	tests := []struct {
		name, encoding, body string
		status               int
		field, says          string
	}{
		{"gzip", "gzip", gzipped(t, events), 200, "", ""},
		{"x-gzip, any case", " X-Gzip", gzipped(t, events), 200, "", ""},
		{"gzip without the header", "", gzipped(t, events), 415, "Content-Encoding", "Content-Encoding: gzip"},
		{"another encoding", "br", events, 415, "Content-Encoding", "gzip"},
		{"not gzip", "gzip", events, 400, "Content-Encoding", "not valid gzip"},
		{"cut short", "gzip", gzipped(t, events)[:30], 400, "Content-Encoding", "not valid gzip"},
		{"a bomb", "gzip", gzipped(t, "\n"+strings.Repeat(" ", 5<<20)), 413, "", "inflates to more than 4194304 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/api/v1/events", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("HTTP %d %s, want %d", resp.StatusCode, raw, tt.status)
			}
			if tt.status == 200 {
				var ans ingestAnswer
				if json.Unmarshal(raw, &ans); len(ans.Results) != 2 || ans.Rejected != 0 {
					t.Fatalf("answer %s", raw)
				}
				return
			}
			var eb apiclient.ErrorBody
			json.Unmarshal(raw, &eb)
			if eb.Error == nil || eb.Error.Field != tt.field || !strings.Contains(eb.Error.Message+" "+eb.Error.Hint, tt.says) {
				t.Errorf("error %s, want field %q saying %q", raw, tt.field, tt.says)
			}
		})
	}
	for _, id := range []string{"gz-1", "gz-2"} {
		if _, err := b.Get("", id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// allocatedBy returns the bytes f allocated: an upper bound of the peak
// memory it added, which is what a request must keep within a small
// multiple of its body.
func allocatedBy(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// cheapWriter is a ResponseWriter that keeps the status and the start of
// the body, so that measuring a request does not count a recorder's copy
// of the answer.
type cheapWriter struct {
	h    http.Header
	code int
	head []byte
}

func (c *cheapWriter) Header() http.Header  { return c.h }
func (c *cheapWriter) WriteHeader(code int) { c.code = code }
func (c *cheapWriter) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = 200
	}
	c.head = append(c.head, p[:min(len(p), 4096-len(c.head))]...)
	return len(p), nil
}

// Issue 16.4: a 4 MiB body of [1,1,1,...] took 1.22 GB before it was
// answered 429, and NDJSON "{}\n" × 1.4 M 570 MB: every element cost a few
// hundred bytes of results, however short. Decoding now stops as soon as
// the elements pass the request's limit (one per 48 bytes of body, 10 000,
// the token's rate), so what one request allocates, its body's buffer
// included, stays within 12× its body plus 64 KiB, and about 2× for the
// largest bodies. Not parallel: it reads the process's allocation counters.
//
//	go test -count=1 -run TestIngestMemoryPerRequest -v ./httpapi
//
// prints the figures that docs/reliability.md records.
func TestIngestMemoryPerRequest(t *testing.T) {
	b, err := bus.New(bus.Options{Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(t.Context())
	defer b.Stop(context.Background())
	limited, unlimited := New(Options{Bus: b, IngestRate: 1000}), New(Options{Bus: b})
	events := func(n int) string {
		var s strings.Builder
		s.WriteByte('[')
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `{"taskID":"mem-%06d","name":"mem","sequence":1,"status":"running","ts":1764400000000}`, i)
		}
		return s.String() + "]"
	}
	const maxBody = 4 << 20
	ones := func(size int) string { return "[" + strings.Repeat("1,", (size-3)/2) + "1]" }
	padded := func(n int) string { return "[" + strings.Repeat(`{"pad":"`+strings.Repeat("x", 40)+`"},`, n) + "{}]" }
	tenThousand := events(10_000)
	post := func(h http.Handler, ctype, body string) *cheapWriter {
		req := httptest.NewRequest("POST", "http://127.0.0.1/api/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		w := &cheapWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		return w
	}
	post(unlimited, "application/json", tenThousand) // the tasks exist: the measured post is duplicates
	tests := []struct {
		name, ctype, body string
		h                 http.Handler
		status            int
		code              string
	}{
		{"[1,1,1,...], 2 097 151 of them", "application/json", ones(maxBody), unlimited, 413, apollo.ETOOLARGE},
		{"NDJSON {} × 1 398 101", "application/x-ndjson", strings.Repeat("{}\n", maxBody/3), unlimited, 413, apollo.ETOOLARGE},
		{"[1,1,1,...] of 100 KB", "application/json", ones(100_000), unlimited, 400, apollo.EINVALID},
		{"[1,1,1,...] of 480 KB", "application/json", ones(480_000), unlimited, 400, apollo.EINVALID},
		{"10 001 objects of 49 bytes", "application/json", padded(10_000), unlimited, 413, apollo.ETOOLARGE},
		{"1 001 events at 1 000 a second", "application/json", events(1001), limited, 413, apollo.ETOOLARGE},
		{"10 000 events (duplicates)", "application/json", tenThousand, unlimited, 200, ""},
	}
	for _, tt := range tests {
		if len(tt.body) > maxBody {
			t.Fatalf("%s: the body is %d bytes, over the limit", tt.name, len(tt.body))
		}
		var w *cheapWriter
		n := allocatedBy(func() { w = post(tt.h, tt.ctype, tt.body) })
		var eb apiclient.ErrorBody
		json.Unmarshal(w.head, &eb)
		if w.code != tt.status || tt.code != "" && (eb.Error == nil || eb.Error.Code != tt.code) {
			t.Errorf("%s: HTTP %d %.300s, want %d %s", tt.name, w.code, w.head, tt.status, tt.code)
		}
		if tt.status == 429 && w.h.Get("Retry-After") == "" {
			t.Errorf("%s: 429 without Retry-After", tt.name)
		}
		t.Logf("%-32s body %8d B  allocated %9d B  %5.2f× the body  HTTP %d", tt.name, len(tt.body), n, float64(n)/float64(len(tt.body)), w.code)
		if bound := 12*uint64(len(tt.body)) + 64<<10; n > bound {
			t.Errorf("%s: %d bytes allocated for a body of %d, over 12× the body + 64 KiB (%d)", tt.name, n, len(tt.body), bound)
		}
	}
}

// Issue 20.2: an ingest request reuses the buffers of the requests before
// it (the body, the decoded events, the outcomes, the answer), so what it
// allocates is what its events keep: here, for a batch the bus answers
// duplicate (it keeps nothing), little more than the task IDs. Before, the
// events alone were 120 bytes each and the answer was built anew. A
// second batch of another shape (an error in the middle, fewer events)
// checks that nothing of the first leaks into its answer.
func TestIngestReusesRequestBuffers(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers on purpose: reuse cannot be measured")
	}
	b, err := bus.New(bus.Options{Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(t.Context())
	defer b.Stop(context.Background())
	h := New(Options{Bus: b})
	batch := func(n int) string {
		var s strings.Builder
		s.WriteByte('[')
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `{"taskID":"reuse-%03d","name":"reuse","sequence":1,"status":"running","ts":1764400000000,"extra":{"host":"w1"}}`, i)
		}
		return s.String() + "]"
	}
	post := func(body string) *cheapWriter {
		req := httptest.NewRequest("POST", "http://127.0.0.1/api/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := &cheapWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		return w
	}
	// allocated is what one post of body allocates, with the buffers of
	// the posts before it to reuse.
	// No collection runs while it measures: a collection empties the pools
	// (twice, counting the victim cache), and the next posts would count
	// buffers the code does reuse (seen under load in CI: 134 B/event).
	allocated := func(body, want string) uint64 {
		const rounds = 20
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		post(body)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range rounds {
			if w := post(body); w.code != 200 || !bytes.Contains(w.head, []byte(want)) {
				t.Fatalf("HTTP %d %.300s, want %s", w.code, w.head, want)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / rounds
	}
	const n = 100
	if w := post(batch(n)); w.code != 200 || !bytes.Contains(w.head, []byte(`"accepted":100,`)) {
		t.Fatalf("first post: HTTP %d %.300s", w.code, w.head)
	}
	// One event's post is the request's fixed cost (the test's request and
	// writer included); each further event should cost its task ID and
	// its extra, about 32 bytes, and the test writer's copy of its result,
	// about 24: 484 bytes before the buffers were reused.
	one, many := allocated(batch(1), `"duplicate":1,`), allocated(batch(n), `"duplicate":100,`)
	perEvent := float64(many-one) / (n - 1)
	t.Logf("a post of 1 duplicate allocates %d bytes, of %d: %d (%.0f bytes per further event)", one, n, many, perEvent)
	if perEvent > 96 {
		t.Errorf("each event of a batch of duplicates allocates %.0f bytes, over 96: the request's buffers are not reused", perEvent)
	}

	w := post(`[{"taskID":"reuse-000","sequence":1,"status":"running","ts":1764400000000},` +
		`{"taskID":"reuse-x","sequence":"one","status":"running","ts":1764400000000},` +
		`{"taskID":"reuse-new","name":"reuse","sequence":1,"status":"running","ts":1764400000000}]`)
	var ans ingestAnswer
	if err := json.Unmarshal(w.head, &ans); err != nil || w.code != 200 {
		t.Fatalf("HTTP %d %.300s: %v", w.code, w.head, err)
	}
	got := []string{}
	for _, r := range ans.Results {
		got = append(got, r.Result)
	}
	if fmt.Sprint(got) != "[duplicate rejected accepted]" || ans.Results[1].Error == nil || ans.Results[1].Error.Field != "sequence" ||
		ans.Results[0].Error != nil || ans.Results[2].Error != nil || ans.Accepted != 1 || ans.Duplicate != 1 || ans.Rejected != 1 {
		t.Errorf("answer %s", w.head)
	}
}

// Issue 20.3: the usual Content-Types of an ingest body are read without
// parsing (mime.ParseMediaType allocated a map for every request), and
// mean what they meant.
func TestEventsContentTypeFastPath(t *testing.T) {
	body := []byte(`{"taskID":"a"}`)
	for _, tt := range []struct {
		ct     string
		ndjson bool
		allocs float64
	}{
		{"", false, 0},
		{"application/json", false, 0},
		{"application/x-ndjson", true, 0},
		{"application/json; charset=utf-8", false, 2}, // parsed, as before
		{"Application/JSON", false, 2},
	} {
		r := httptest.NewRequest("POST", "/api/v1/events", nil)
		if tt.ct != "" {
			r.Header.Set("Content-Type", tt.ct)
		}
		ndjson, err := eventsContentType(r, body)
		if err != nil || ndjson != tt.ndjson {
			t.Errorf("%q: ndjson %v, %v; want %v", tt.ct, ndjson, err, tt.ndjson)
		}
		if n := testing.AllocsPerRun(20, func() { eventsContentType(r, body) }); n > tt.allocs {
			t.Errorf("%q: %.0f allocations, want at most %.0f", tt.ct, n, tt.allocs)
		}
	}
}
