package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// config lets one client send as fast as it can and keeps every run of
// the largest size in memory.
const config = "limits:\n  ingest_per_second: 0\n  tasks: 4000000\n"

// batch is the results per batched POST.
const batch = 100

// target is one way Apollo-11 is told results.
type target struct {
	name string
	// send sends request k of a window whose first result is numbered
	// first, to a server holding n jobs; it returns the results the
	// request completed.
	send func(a *apolloClient, n int, first, k int64) (int, error)
}

var targets = []target{
	{"batched POST, 100 results (200 events) per request", func(a *apolloClient, n int, first, k int64) (int, error) {
		return batch, a.post(n, first+k*batch, batch)
	}},
	{"one event per POST (2 requests per result)", func(a *apolloClient, n int, first, k int64) (int, error) {
		a.body = append(a.body[:0], '[')
		a.body = appendRun(a.body, n, first+k/2, k%2 == 0, k%2 == 1)
		a.body = append(a.body, ']')
		return int(k % 2), a.send(1)
	}},
	{"GET /ping/NAME (1 request per result)", func(a *apolloClient, n int, first, k int64) (int, error) {
		return 1, a.ping(jobName(int((first + k) % int64(n))))
	}},
}

// measureApollo starts a fresh server, gives each of n jobs one finished
// run, and loads it with t. It returns the window and the RSS per job.
func measureApollo(bin string, t target, n int, o opts) (window, float64, error) {
	p, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: config})
	if err != nil {
		return window{}, 0, err
	}
	defer p.Remove()
	defer p.Stop(30 * time.Second)
	empty, err := harness.Sample(p.PID())
	if err != nil {
		return window{}, 0, err
	}
	a := &apolloClient{url: p.URL(), c: harness.NewClient(1)}
	defer a.c.CloseIdleConnections()
	for first := 0; first < n; first += 1000 {
		if err := a.post(n, int64(first), min(1000, n-first)); err != nil {
			return window{}, 0, fmt.Errorf("filling: %w", err)
		}
	}
	full, err := harness.Sample(p.PID())
	if err != nil {
		return window{}, 0, err
	}
	w, err := load(p.PID(), o, func(k int64) (int, error) { return t.send(a, n, int64(n), k) })
	return w, float64(full.RSS-empty.RSS) / float64(n), err
}

type apolloClient struct {
	url  string
	c    *http.Client
	body []byte
	ans  bytes.Buffer
}

// post sends results first..first+k-1 in one request.
func (a *apolloClient) post(n int, first int64, k int) error {
	a.body = append(a.body[:0], '[')
	for r := first; r < first+int64(k); r++ {
		if r > first {
			a.body = append(a.body, ',')
		}
		a.body = appendRun(a.body, n, r, true, true)
	}
	a.body = append(a.body, ']')
	return a.send(2 * k)
}

// send posts a.body and checks that its events were all accepted.
func (a *apolloClient) send(events int) error {
	status, acc, err := harness.Post(a.c, a.url, a.body, &a.ans)
	switch {
	case err != nil:
		return err
	case status != http.StatusOK || acc != events:
		return fmt.Errorf("POST /api/v1/events: %d, %d of %d events accepted: %.300s", status, acc, events, a.ans.Bytes())
	}
	return nil
}

func (a *apolloClient) ping(name string) error {
	resp, err := a.c.Get(a.url + "/ping/" + name)
	if err != nil {
		return err
	}
	a.ans.Reset()
	a.ans.ReadFrom(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /ping/%s: %s %s", name, resp.Status, a.ans.Bytes())
	}
	return nil
}

// appendRun writes result r, a run of job r mod n, as its running event,
// its success event or both (comma-separated): a result on Apollo-11 is a
// finished run.
func appendRun(b []byte, n int, r int64, running, success bool) []byte {
	end := time.Now().UnixMilli()
	start := end - 1000 - r%60_000
	if running {
		b = harness.AppendEvent(b, "run-", r, n, 1, "running", start)
	}
	if running && success {
		b = append(b, ',')
	}
	if success {
		b = harness.AppendEvent(b, "run-", r, n, 2, "success", end)
	}
	return b
}
