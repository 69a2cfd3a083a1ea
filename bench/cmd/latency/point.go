package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// warmup is the load each point runs, unmeasured, before it measures.
const warmup = 300 * time.Millisecond

// config is apollo.yaml for the measured server: no per-token rate limit,
// room for every task.
const config = "limits:\n  ingest_per_second: 0\n  tasks: 20000000\n"

// result is one measured point: one rate, one number of clients, one
// fresh apollo process.
type result struct {
	rate    float64
	clients int
	ws      harness.Hist // scheduled send → first WebSocket message with the task, every (client, event)
	tail    harness.Hist // the same for the last quarter of the events: a growing lag shows here
	open    harness.OpenResult
	missing int64   // (client, event) pairs not delivered by the drain deadline
	closed  int     // clients the server closed (too slow) or that failed
	badIdx  int64   // task IDs in messages that were never sent: a bug
	cpu     float64 // server CPU µs per event accepted
	ownCPU  float64 // this process's (senders and clients) CPU µs per event
}

// keepsUp is the step search's test: every request answered 200, every
// client got every event within the drain time, the senders on schedule
// (the median event, over the run and over its last quarter, sent less
// than a tick after its time: a stall of the machine delays some ticks
// without the senders falling behind for good) and no growing lag (the
// median WebSocket latency, over the run and over its last quarter,
// under lag). Late ticks are reported, not judged.
func (r *result) keepsUp(lag, tick time.Duration) (bool, string) {
	switch {
	case r.open.Failed > 0:
		return false, fmt.Sprintf("%d requests failed (%s)", r.open.Failed, r.open.Status)
	case r.closed > 0:
		return false, fmt.Sprintf("%d clients closed", r.closed)
	case r.missing > 0:
		return false, fmt.Sprintf("%d deliveries missing after the drain", r.missing)
	case r.open.SendLag.Quantile(.5) > tick || r.open.SendLagTail.Quantile(.5) > tick:
		return false, fmt.Sprintf("senders behind: median send lag %v, last quarter %v",
			r.open.SendLag.Quantile(.5).Round(time.Millisecond), r.open.SendLagTail.Quantile(.5).Round(time.Millisecond))
	case r.ws.Quantile(.5) > lag:
		return false, fmt.Sprintf("p50 %v > %v", r.ws.Quantile(.5).Round(time.Millisecond), lag)
	case r.tail.Quantile(.5) > lag:
		return false, fmt.Sprintf("last quarter's p50 %v > %v: lag grows", r.tail.Quantile(.5).Round(time.Millisecond), lag)
	}
	return true, "yes"
}

// client is one WebSocket subscriber, subscribed to every task change
// without coalescing.
type client struct {
	conn     *websocket.Conn
	ws, tail harness.Hist
	received atomic.Int64
	failed   atomic.Bool
	done     chan struct{}
}

var (
	tasksPrefix    = []byte(`{"type":"tasks"`)
	snapshotPrefix = []byte(`{"type":"snapshot"`)
	taskIDMark     = []byte(`"taskID":"L`)
)

// read notes, for each task in tasks messages, the time since its event's
// scheduled send time. It reuses one buffer and does not decode the JSON,
// so the measuring client costs the shared CPUs little.
func (c *client) read(sched []atomic.Int64, tailFrom int64, subscribed *sync.WaitGroup, bad *atomic.Int64, stopping *atomic.Bool) {
	defer close(c.done)
	var buf bytes.Buffer
	snap := false
	for {
		_, rd, err := c.conn.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(rd)
		}
		if err != nil {
			if !stopping.Load() {
				c.failed.Store(true)
				fmt.Fprintln(os.Stderr, "latency: client:", err)
			}
			if !snap {
				subscribed.Done()
			}
			return
		}
		data := buf.Bytes()
		if !snap && bytes.HasPrefix(data, snapshotPrefix) {
			snap = true
			subscribed.Done()
		}
		if !bytes.HasPrefix(data, tasksPrefix) {
			continue
		}
		now := time.Now().UnixNano()
		var n int64
		for rest := data; ; {
			i := bytes.Index(rest, taskIDMark)
			if i < 0 {
				break
			}
			rest = rest[i+len(taskIDMark):]
			var idx int64
			for ; len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9'; rest = rest[1:] {
				idx = idx*10 + int64(rest[0]-'0')
			}
			var at int64
			if idx < int64(len(sched)) {
				at = sched[idx].Load()
			}
			if at == 0 {
				bad.Add(1)
				continue
			}
			d := time.Duration(now - at)
			c.ws.Record(d)
			if idx >= tailFrom {
				c.tail.Record(d)
			}
			n++
		}
		c.received.Add(n)
	}
}

// measure runs one point: a fresh apollo, clients subscribers, an
// open-loop load at rate for dur, then up to drain for the last
// deliveries.
func measure(o opts, rate float64, clients int, dur, drain time.Duration) (*result, error) {
	senders, tick := o.senders, o.tick
	p, err := harness.Start(o.bin, harness.Options{Args: []string{"server", "--fsync", o.fsync}, Config: config})
	if err != nil {
		return nil, err
	}
	defer p.Remove()
	defer p.Stop(10 * time.Second)

	sched := make([]atomic.Int64, int(rate*dur.Seconds())+senders+16)
	tailFrom := int64(rate * dur.Seconds() * 3 / 4)
	var subscribed sync.WaitGroup
	var bad atomic.Int64
	var stopping atomic.Bool
	cs := make([]*client, clients)
	defer func() {
		stopping.Store(true)
		for _, c := range cs {
			if c != nil {
				c.conn.Close(websocket.StatusNormalClosure, "")
				<-c.done
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range cs {
		conn, _, err := websocket.Dial(ctx, "ws://"+p.Addr+"/api/v1/stream", &websocket.DialOptions{Subprotocols: []string{"apollo.v1"}})
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		conn.SetReadLimit(64 << 20)
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","coalesce":false}`)); err != nil {
			conn.Close(websocket.StatusInternalError, "")
			return nil, fmt.Errorf("client %d subscribe: %w", i, err)
		}
		cs[i] = &client{conn: conn, done: make(chan struct{})}
		subscribed.Add(1)
		go cs[i].read(sched, tailFrom, &subscribed, &bad, &stopping)
	}
	if err := waitGroup(&subscribed, 30*time.Second); err != nil {
		return nil, fmt.Errorf("waiting for %d snapshots: %w", clients, err)
	}

	// Warm up the fresh process (and the clients) at the same rate, with
	// task IDs the clients do not measure ("W…").
	warm := harness.OpenLoop{URL: p.URL(), Rate: rate, Senders: senders, Tick: tick, Duration: warmup, Body: harness.NewEvents("W")}.Run()
	if warm.Failed > 0 {
		return nil, fmt.Errorf("warm-up at %.0f/s: %d requests failed (%s)", rate, warm.Failed, warm.Status)
	}

	cpu0, _ := harness.CPUTime(p.PID())
	own0, _ := harness.CPUTime(os.Getpid())
	open := harness.OpenLoop{
		URL: p.URL(), Rate: rate, Senders: senders, Tick: tick, Duration: dur,
		Body: harness.NewEvents("L"),
		Sent: func(first int64, n int, at time.Time) {
			ns := at.UnixNano()
			for i := first; i < first+int64(n) && i < int64(len(sched)); i++ {
				sched[i].Store(ns)
			}
		},
	}.Run()
	r := &result{rate: rate, clients: clients, open: open}

	// Poll until every client has every accepted event, or the drain
	// deadline passes.
	want := open.Events
	deadline := time.Now().Add(drain)
	for {
		var missing int64
		for _, c := range cs {
			if !c.failed.Load() {
				missing += max(0, want-c.received.Load())
			}
		}
		r.missing = missing
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cpu1, _ := harness.CPUTime(p.PID())
	own1, _ := harness.CPUTime(os.Getpid())
	stopping.Store(true)
	for _, c := range cs {
		if c.failed.Load() {
			r.closed++
		}
	}
	for _, c := range cs {
		c.conn.Close(websocket.StatusNormalClosure, "")
		<-c.done
		r.ws.Merge(&c.ws)
		r.tail.Merge(&c.tail)
	}
	cs = nil
	r.badIdx = bad.Load()
	r.cpu = (cpu1 - cpu0).Seconds() / float64(max(1, want)) * 1e6
	r.ownCPU = (own1 - own0).Seconds() / float64(max(1, want)) * 1e6
	fmt.Fprintf(os.Stderr, "latency: %d clients at %.0f/s: ws %v; %s; missing %d, closed %d; CPU µs/event server %.1f, bench %.1f\n",
		clients, rate, r.ws.Latencies(), open.String(), r.missing, r.closed, r.cpu, r.ownCPU)
	return r, nil
}

func waitGroup(wg *sync.WaitGroup, d time.Duration) error {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return fmt.Errorf("not within %v", d)
	}
}
