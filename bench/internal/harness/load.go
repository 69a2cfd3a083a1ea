package harness

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// EventGen writes bodies of POST /api/v1/events (docs/protocol.md). Each
// goroutine has its own EventGen; they share Next, so task IDs never
// repeat within a run.
type EventGen struct {
	Prefix    string        // task IDs are Prefix followed by a number
	Jobs      int           // job names cycle over this many (default 100)
	Lifecycle bool          // each task reports pending, running, success in consecutive events; otherwise each event is a new running task
	Next      *atomic.Int64 // task number source
	id        int64
	step      int
}

var statuses = [3]string{"pending", "running", "success"}

// Append writes a JSON array of n events stamped ts (Unix ms) to b. A
// task's lifecycle continues across calls, so with n = 1 its three events
// go out in three consecutive requests of this goroutine, in order.
func (g *EventGen) Append(b []byte, n int, ts int64) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if !g.Lifecycle || g.step == 0 {
			g.id = g.Next.Add(1)
		}
		step := 1
		if g.Lifecycle {
			step = g.step
			g.step = (g.step + 1) % 3
		}
		b = AppendEvent(b, g.Prefix, g.id, g.Jobs, int64(step+1), statuses[step], ts+int64(step))
	}
	return append(b, ']')
}

// AppendEvent writes one event object: task prefix+id of job
// "load_job_<id mod jobs>", with a small extra object as reporters send.
func AppendEvent(b []byte, prefix string, id int64, jobs int, seq int64, status string, ts int64) []byte {
	if jobs <= 0 {
		jobs = 100
	}
	b = append(b, `{"taskID":"`...)
	b = append(b, prefix...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `","name":"load_job_`...)
	b = strconv.AppendInt(b, id%int64(jobs), 10)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	return append(b, `,"extra":{"host":"worker-7"}}`...)
}

// NewClient is an HTTP client for conc concurrent senders to one host.
func NewClient(conc int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}}
}

var acceptedKey = []byte(`"accepted":`)

// Post sends one events body and returns the status and, when the answer
// has one, its "accepted" count (-1 otherwise). buf is reused for the
// answer.
func Post(c *http.Client, url string, body []byte, buf *bytes.Buffer) (status, accepted int, err error) {
	resp, err := c.Post(url+"/api/v1/events", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, -1, err
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	accepted = -1
	if i := bytes.Index(buf.Bytes(), acceptedKey); i >= 0 {
		rest := buf.Bytes()[i+len(acceptedKey):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		accepted, _ = strconv.Atoi(string(rest[:j]))
	}
	return resp.StatusCode, accepted, err
}

// LoadResult is what a load run saw.
type LoadResult struct {
	Events   int64 // events in requests answered 200
	Accepted int64 // the answers' "accepted" counts (answers without one count their events)
	Requests int64
	Failed   int64  // requests not answered 200 (transport errors included)
	Status   string // the first failure, for the message
	Elapsed  time.Duration
	Latency  Hist // per request (closed loop) or per event from its scheduled time (open loop)
}

// EPS is events per second answered 200.
func (r *LoadResult) EPS() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

func (r *LoadResult) add(o *LoadResult) {
	r.Events += o.Events
	r.Accepted += o.Accepted
	r.Requests += o.Requests
	r.Failed += o.Failed
	if r.Status == "" {
		r.Status = o.Status
	}
	r.Latency.Merge(&o.Latency)
}

func (r *LoadResult) note(status, accepted, n int, err error) {
	r.Requests++
	switch {
	case err != nil:
		r.Failed++
		if r.Status == "" {
			r.Status = err.Error()
		}
	case status != http.StatusOK:
		r.Failed++
		if r.Status == "" {
			r.Status = "HTTP " + strconv.Itoa(status)
		}
	default:
		r.Events += int64(n)
		if accepted < 0 {
			accepted = n
		}
		r.Accepted += int64(accepted)
	}
}

// ClosedLoop sends batches of batch events from conc goroutines, each
// sending its next request when the previous one is answered, for d.
// gen(i) makes goroutine i's event generator.
func ClosedLoop(url string, conc, batch int, d time.Duration, gen func(i int) *EventGen) LoadResult {
	client := NewClient(conc)
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var total LoadResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conc {
		wg.Go(func() {
			g := gen(i)
			var mine LoadResult
			var body []byte
			var ans bytes.Buffer
			for ctx.Err() == nil {
				body = g.Append(body[:0], batch, time.Now().UnixMilli())
				t0 := time.Now()
				status, acc, err := Post(client, url, body, &ans)
				mine.note(status, acc, batch, err)
				if err == nil && status == http.StatusOK {
					mine.Latency.Record(time.Since(t0))
				}
			}
			mu.Lock()
			total.add(&mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	return total
}

// OpenLoop sends events at a fixed rate whatever the answers: Senders
// goroutines, each on its own schedule of one request every Tick (the
// senders' ticks are staggered evenly across a Tick), each request
// carrying the events due since the sender's previous tick (Rate × Tick /
// Senders on average). Every event of a tick has that tick's time as its
// scheduled send time. A sender whose previous request is still out when
// its next tick falls due is behind: when it is free it sends every event
// due so far in one request, and counts as late each tick it sends more
// than one Tick after the tick's time. Latencies are taken from the
// scheduled times, so a slow answer is not hidden by the sender waiting
// for it.
type OpenLoop struct {
	URL      string
	Rate     float64       // events per second, all senders together
	Senders  int           // default 8
	Tick     time.Duration // default 10 ms
	Duration time.Duration
	// Body appends the events numbered first..first+n-1 (numbers are
	// handed out in send order from 0) to b, comma-separated, without
	// the array's brackets; ts is Unix ms.
	Body func(b []byte, first int64, n int, ts int64) []byte
	// Sent, if set, is called before each request with its events'
	// numbers and their scheduled times, one call per tick covered.
	Sent func(first int64, n int, sched time.Time)
}

// OpenResult adds the schedule's figures to a LoadResult; Latency is the
// accept latency of each event, from its scheduled time to the answer.
type OpenResult struct {
	LoadResult
	Ticks, LateTicks int64
	Next             int64 // numbers handed out: events sent or attempted
	// SendLag is, per event, how long after its scheduled time its
	// request went out; SendLagTail the same over the last quarter of the
	// schedule. A sender that keeps up has a median under a Tick; a
	// backlog that grows shows in the tail's.
	SendLag, SendLagTail Hist
}

// Run runs the schedule for o.Duration from now.
func (o OpenLoop) Run() OpenResult {
	senders := cmp.Or(o.Senders, 8)
	tick := cmp.Or(o.Tick, 10*time.Millisecond)
	client := NewClient(senders)
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var total OpenResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now().Add(tick)
	ticks := int64(o.Duration / tick)
	perTick := o.Rate * tick.Seconds() / float64(senders)
	for s := range senders {
		wg.Go(func() {
			var mine OpenResult
			var body []byte
			var ans bytes.Buffer
			var chunks []due
			offset := time.Duration(s) * tick / time.Duration(senders)
			for k := int64(0); k < ticks; {
				at := start.Add(offset + time.Duration(k)*tick)
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				// Every tick due by now goes in this request.
				chunks = chunks[:0]
				now := time.Now()
				tail := k >= ticks*3/4
				for first := true; k < ticks; k, first = k+1, false {
					at := start.Add(offset + time.Duration(k)*tick)
					if at.After(now) && !first {
						break
					}
					mine.Ticks++
					if now.Sub(at) > tick {
						mine.LateTicks++
					}
					c := int(float64(k+1)*perTick) - int(float64(k)*perTick)
					mine.SendLag.RecordN(now.Sub(at), int64(c))
					if tail {
						mine.SendLagTail.RecordN(now.Sub(at), int64(c))
					}
					if c > 0 {
						chunks = append(chunks, due{next.Add(int64(c)) - int64(c), c, at})
					}
				}
				// What is due goes out in requests of at most maxEvents,
				// back to back, as a reporter that fell behind sends its
				// backlog: one request of everything was refused (413)
				// once a sender was more than a few ticks behind.
				for todo := chunks; len(todo) > 0; {
					var req []due
					req, todo = takeEvents(todo, maxEvents)
					body = append(body[:0], '[')
					n := 0
					for i, c := range req {
						if o.Sent != nil {
							o.Sent(c.first, c.n, c.at)
						}
						if i > 0 {
							body = append(body, ',')
						}
						body = o.Body(body, c.first, c.n, c.at.UnixMilli())
						n += c.n
					}
					body = append(body, ']')
					status, acc, err := Post(client, o.URL, body, &ans)
					mine.note(status, acc, n, err)
					done := time.Now()
					if err == nil && status == http.StatusOK {
						for _, c := range req {
							mine.Latency.RecordN(done.Sub(c.at), int64(c.n))
						}
					}
				}
			}
			mu.Lock()
			total.add(&mine.LoadResult)
			total.Ticks += mine.Ticks
			total.LateTicks += mine.LateTicks
			total.SendLag.Merge(&mine.SendLag)
			total.SendLagTail.Merge(&mine.SendLagTail)
			mu.Unlock()
		})
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	total.Next = next.Load()
	return total
}

// maxEvents is the server's limit on the events of one request
// (docs/protocol.md).
const maxEvents = 10_000

// due is one tick's events: numbered first..first+n-1, scheduled at at.
type due struct {
	first int64
	n     int
	at    time.Time
}

// takeEvents splits ds after its first max events, cutting a tick's
// events in two where the limit falls. ds is reused for the rest.
func takeEvents(ds []due, max int) (head, rest []due) {
	n := 0
	for i, d := range ds {
		if n+d.n <= max {
			n += d.n
			continue
		}
		if room := max - n; room > 0 {
			head = append(slices.Clone(ds[:i]), due{d.first, room, d.at})
			ds[i] = due{d.first + int64(room), d.n - room, d.at}
			return head, ds[i:]
		}
		return slices.Clone(ds[:i]), ds[i:]
	}
	return ds, nil
}

// NewEvents is an OpenLoop Body: each event is a new running task
// prefix<number> of one of 100 jobs.
func NewEvents(prefix string) func(b []byte, first int64, n int, ts int64) []byte {
	return func(b []byte, first int64, n int, ts int64) []byte {
		for i := range int64(n) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendEvent(b, prefix, first+i, 100, 1, "running", ts)
		}
		return b
	}
}

// String is a one-line account for stderr.
func (r *OpenResult) String() string {
	return fmt.Sprintf("events=%d requests=%d failed=%d late ticks=%d/%d accept %v", r.Events, r.Requests, r.Failed, r.LateTicks, r.Ticks, r.Latency.Latencies())
}
