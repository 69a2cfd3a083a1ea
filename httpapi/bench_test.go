package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/proccpu"
)

// BenchmarkIngest compares, with the same client in the same run, a null
// handler that only reads the body against Apollo-11's ingest, for single
// events and batches of 100. Report the ratio of events/s (docs/benchmarks.md).
func BenchmarkIngest(b *testing.B) {
	null := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{}`))
	})
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("null/batch=%d", batch), func(b *testing.B) { runIngest(b, null, batch) })
		b.Run(fmt.Sprintf("apollo/batch=%d", batch), func(b *testing.B) {
			bs, _ := bus.New(bus.Options{Logger: discardLogger})
			bs.Start(context.Background())
			defer bs.Stop(context.Background())
			runIngest(b, New(Options{Bus: bs}), batch)
		})
	}
}

var benchTask atomic.Int64

func runIngest(b *testing.B, h http.Handler, batch int) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(4)
	var events atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		var body bytes.Buffer
		for pb.Next() {
			body.Reset()
			body.WriteByte('[')
			for i := range batch {
				if i > 0 {
					body.WriteByte(',')
				}
				id := benchTask.Add(1)
				fmt.Fprintf(&body, `{"taskID":"bench-%d","name":"bench_job","sequence":1,"status":"running","ts":1764400000000,"scheduledAt":1764400000000,"extra":{"host":"worker-1","attempt":1}}`, id)
			}
			body.WriteByte(']')
			resp, err := client.Post(srv.URL+"/api/v1/events", "application/json", bytes.NewReader(body.Bytes()))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
			events.Add(int64(batch))
		}
	})
	b.ReportMetric(float64(events.Load())/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPingAndPage compares, in one run and with the same client, a
// one-event POST against a plain ping (an end: the server looks for the
// job's open run, finds none, and records a run reported only by its end;
// each ping names another job, so each is a new run as each POST is) and
// a page of 100 tasks (GET /api/v1/tasks?limit=100),
// with 0, 10 000, 100 000 and 1 000 000 tasks in memory (issue 20.1: a
// ping costs at most 2× the POST at every size, and a page of 100 the
// same at 10 000 and 1 000 000). Each size has a bus of its own; every
// POST and ping adds a run, so the "tasks" metric says how many were in
// memory at the end. The bus has no log, so nothing hides the lookup's
// cost behind an fsync. One op is one request, one at a time; cpu-ns/op
// is the process's CPU time (client and server) per request, which the
// machine's other load does not inflate as it does ns/op.
func BenchmarkPingAndPage(b *testing.B) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, n := range []int{0, 10_000, 100_000, 1_000_000} {
		bs, _ := bus.New(bus.Options{Logger: discardLogger})
		bs.Start(context.Background())
		fillTasks(bs, n)
		srv := httptest.NewServer(New(Options{Bus: bs}))
		do := func(b *testing.B, method, path, body string) {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("%s %s: status %d", method, path, resp.StatusCode)
			}
		}
		for _, op := range []struct {
			name string
			run  func(b *testing.B)
		}{
			{"post", func(b *testing.B) {
				do(b, "POST", "/api/v1/events", fmt.Sprintf(`{"taskID":"bench-%d","name":"bench_job","sequence":1,"status":"success","ts":1764400000000}`, benchTask.Add(1)))
			}},
			{"ping", func(b *testing.B) { do(b, "GET", fmt.Sprintf("/ping/ping_job_%d", benchTask.Add(1)), "") }},
			{"page", func(b *testing.B) { do(b, "GET", "/api/v1/tasks?limit=100", "") }},
		} {
			b.Run(fmt.Sprintf("tasks=%d/%s", n, op.name), func(b *testing.B) {
				var cpu time.Duration
				for i := 0; b.Loop(); i++ {
					if i == 0 {
						cpu = proccpu.Used()
					}
					op.run(b)
				}
				b.ReportMetric(float64(proccpu.Used()-cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(bs.Stats().Tasks), "tasks")
			})
		}
		srv.Close()
		bs.Stop(context.Background())
	}
}

// fillTasks adds n tasks to bs straight through Publish: runs of 1 000
// jobs, one in eight still running, the others finished.
func fillTasks(bs *bus.Bus, n int) {
	const batch = 1000
	evs := make([]apollo.Event, 0, batch)
	out := make([]bus.Outcome, batch)
	for i := range n {
		st := apollo.StatusSuccess
		if i%8 == 0 {
			st = apollo.StatusRunning
		}
		evs = append(evs, apollo.Event{TaskID: fmt.Sprintf("fill-%07d", i), Name: fmt.Sprintf("job_%03d", i%1000),
			Sequence: 1, Status: st, Ts: 1764400000000 + int64(i)})
		if len(evs) == batch || i == n-1 {
			bs.Publish(context.Background(), evs, out)
			evs = evs[:0]
		}
	}
	bs.WaitDrained(context.Background())
}
