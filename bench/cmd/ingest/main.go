// Command ingest measures HTTP ingest: the same load client against a null
// handler that only reads the body and against a running `apollo server`,
// in one run, and prints events/s for each and their ratio.
//
//	go run ./cmd/ingest -apollo ../apollo -batch 100 -duration 10s
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	apolloBin := flag.String("apollo", "", "path to the apollo binary (built with go build ./cmd/apollo); empty: null handler only")
	batch := flag.Int("batch", 100, "events per request")
	conc := flag.Int("c", 8, "concurrent requests")
	dur := flag.Duration("duration", 10*time.Second, "how long each target is loaded")
	fsync := flag.String("fsync", "batch", "the apollo server's --fsync policy")
	mix := flag.String("mix", "lifecycle", "lifecycle: each run reports pending, running, success in the batch; new: every event starts a new run")
	flag.Parse()

	results := []result{}
	null := startNull()
	results = append(results, load("null handler", null, *batch, *conc, *dur, *mix))
	if *apolloBin != "" {
		addr, stop, err := startApollo(*apolloBin, *fsync)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ingest:", err)
			os.Exit(1)
		}
		results = append(results, load("apollo --fsync "+*fsync, "http://"+addr, *batch, *conc, *dur, *mix))
		stop()
	}
	fmt.Printf("| target | batch | events/s | p50 request | p99 request | ratio to null |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.0f | %v | %v | %.2f |\n", r.name, *batch, r.eps, r.p50, r.p99, r.eps/results[0].eps)
	}
}

type result struct {
	name     string
	eps      float64
	p50, p99 time.Duration
}

// startNull serves a handler that reads the body and answers {} — the
// ceiling of HTTP ingest with this client on this machine.
func startNull() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	return "http://" + ln.Addr().String()
}

// startApollo runs `apollo server` on a fresh data directory.
func startApollo(bin, fsync string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "apollo-bench-")
	if err != nil {
		return "", nil, err
	}
	cfg := filepath.Join(dir, "apollo.yaml")
	os.WriteFile(cfg, []byte("limits:\n  ingest_per_second: 0\n  tasks: 10000000\n"), 0o644)
	cmd := exec.Command(bin, "server", "--config", cfg, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--fsync", fsync)
	cmd.Stderr = io.Discard
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(out, buf, 20)
	line := string(buf[:n])
	i := strings.Index(line, "http://")
	if i < 0 {
		cmd.Process.Kill()
		return "", nil, fmt.Errorf("apollo did not start: %q", line)
	}
	addr := strings.Fields(line[i+7:])[0]
	go io.Copy(io.Discard, out)
	return addr, func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(dir)
	}, nil
}

var taskSeq atomic.Int64

// load sends batches of new runs' events for d with c concurrent requests.
func load(name, url string, batch, c int, d time.Duration, mix string) result {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c}}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var events atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			var mine []time.Duration
			for ctx.Err() == nil {
				body.Reset()
				body.WriteByte('[')
				var id int64
				ts := time.Now().UnixMilli()
				for i := range batch {
					if i > 0 {
						body.WriteByte(',')
					}
					step := i % 3
					if mix == "new" {
						step = 1
					}
					if mix == "new" || step == 0 {
						id = taskSeq.Add(1)
					}
					fmt.Fprintf(&body, `{"taskID":"load-%d","name":"load_job_%d","sequence":%d,"status":"%s","ts":%d,"extra":{"host":"worker-7"}}`,
						id, id%100, step+1, [3]string{"pending", "running", "success"}[step], ts+int64(step))
				}
				body.WriteByte(']')
				t0 := time.Now()
				resp, err := client.Post(url+"/api/v1/events", "application/json", bytes.NewReader(body.Bytes()))
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintln(os.Stderr, "ingest:", err)
					}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					events.Add(int64(batch))
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{name: name, eps: float64(events.Load()) / el.Seconds()}
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2].Round(time.Microsecond)
		r.p99 = lat[len(lat)*99/100].Round(time.Microsecond)
	}
	return r
}
