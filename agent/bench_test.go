package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fastServer answers every event accepted with as little work as it can,
// so that the benchmark measures the client. It runs in the benchmark's
// process: its allocations, a few per request, are in allocs/op too.
type fastServer struct {
	events  atomic.Int64
	mu      sync.Mutex
	answers map[int][]byte
}

var eventStart = []byte(`{"taskID":`)

func (s *fastServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := bytes.Count(body, eventStart)
	s.events.Add(int64(n))
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.answer(n))
}

func (s *fastServer) answer(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.answers[n]; ok {
		return a
	}
	a := []byte(`{"results":[` + strings.TrimSuffix(strings.Repeat(`{"result":"accepted"},`, n), ",") +
		`],"accepted":` + strconv.Itoa(n) + `}`)
	s.answers[n] = a
	return a
}

// BenchmarkTaskEvents reports runs (running, then success) through a Client
// to a local server, one op per event: from the Task call until the server
// has answered it. Batch sizes side by side show what batching buys.
func BenchmarkTaskEvents(b *testing.B) {
	for _, batch := range []int{1, 10, 100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchTaskEvents(b, batch) })
	}
}

func benchTaskEvents(b *testing.B, batch int) {
	fs := &fastServer{answers: map[int][]byte{}}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	c, err := New(srv.URL, WithBatchSize(batch), quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer c.Close(ctx)
	ids := make([]string, b.N/2+1)
	for i := range ids {
		ids[i] = "run-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var run *Task
	for i := range b.N {
		report := (*Task).Succeed
		if i%2 == 0 {
			run, report = c.Task(ids[i/2], "bench"), (*Task).Running
		}
		for {
			err := report(run)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrBufferFull) {
				b.Fatal(err)
			}
			c.Flush(ctx) // the producer outran the sender: wait for it
		}
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	if got := fs.events.Load(); got != int64(b.N) {
		b.Fatalf("server answered %d events, want %d", got, b.N)
	}
}
