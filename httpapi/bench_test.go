package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/apollo-11/apollo/bus"
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
			defer bs.Stop()
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
