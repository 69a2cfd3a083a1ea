package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/config"
)

// BenchmarkServerIngest sends batches of 99 events (33 runs reporting
// pending, running, success) to the whole all-in-one server in this
// process — log, bus, metrics, alerting, stream — so a profile attributes
// every instruction of ingest. One op is one event.
func BenchmarkServerIngest(b *testing.B) {
	for _, fsync := range []string{"off", "batch"} {
		b.Run("fsync="+fsync, func(b *testing.B) {
			cfg := config.Default()
			cfg.Data, cfg.Listen, cfg.Fsync = b.TempDir(), "127.0.0.1:0", fsync
			cfg.Limits.IngestPerSec = 0
			ctx, cancel := context.WithCancel(context.Background())
			up := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- runServer(ctx, cfg, serverDeps{log: slog.New(slog.DiscardHandler), ready: func(a string) { up <- a }})
			}()
			addr := <-up
			defer func() { cancel(); <-done }()
			url := "http://" + addr + "/api/v1/events"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			const batch = 99
			bodies := make([][]byte, b.N/batch+1)
			for r := range bodies {
				var buf bytes.Buffer
				buf.WriteByte('[')
				for i := range batch {
					if i > 0 {
						buf.WriteByte(',')
					}
					fmt.Fprintf(&buf, `{"taskID":"r%d-%d","name":"job_%d","sequence":%d,"status":"%s","ts":%d,"extra":{"host":"w1"}}`,
						r, i/3, i%10, i%3+1, [3]string{"pending", "running", "success"}[i%3], time.Now().UnixMilli())
				}
				buf.WriteByte(']')
				bodies[r] = buf.Bytes()
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					if n++; n < batch {
						continue
					}
					n = 0
					body := bodies[next.Add(1)-1]
					resp, err := client.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
