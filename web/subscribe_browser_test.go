package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
)

// tenantMetrics answers the stream's metric messages with one row named
// after the tenant, so that a page shows whose rows it was sent.
type tenantMetrics struct{}

func (tenantMetrics) StreamSummaries(tenant, prefix string) (any, error) {
	return apiclient.MetricsPage{Window: "5m0s", Prefix: prefix, Jobs: []apiclient.JobRow{{Name: "pushed_" + tenant, Count: 1}}}, nil
}

// frameCounts counts the stream's messages by type.
type frameCounts struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{} // has a value when a message came since it was last read
}

func newFrameCounts() *frameCounts {
	return &frameCounts{n: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (c *frameCounts) add(data []byte) {
	var m struct{ Type string }
	if json.Unmarshal(data, &m) != nil {
		return
	}
	c.mu.Lock()
	c.n[m.Type]++
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *frameCounts) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// watchStream counts, as the browser's network sees them, the messages
// every WebSocket of the page receives.
func (b *browser) watchStream() *frameCounts {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatal(err)
	}
	c := newFrameCounts()
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if f, ok := ev.(*network.EventWebSocketFrameReceived); ok && f.Response != nil {
			c.add([]byte(f.Response.PayloadData))
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	return c
}

// streamAll is a client of the stream that asks for every message, and
// counts them: the yardstick of what a page could have been sent.
func (d *dashboard) streamAll(token string) *frameCounts {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d.t.Cleanup(cancel)
	conn, _, err := websocket.Dial(ctx, "ws"+d.srv.URL[len("http"):]+"/api/v1/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		d.t.Fatal(err)
	}
	conn.SetReadLimit(-1)
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe"}`)); err != nil {
		d.t.Fatal(err)
	}
	c := newFrameCounts()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			c.add(data)
		}
	}()
	d.t.Cleanup(func() { conn.CloseNow(); <-done })
	return c
}

// Every page of the dashboard subscribed to every kind of message: a
// page that shows no metrics got the tenant's metric message (a row per
// job, every 10 s), the system message every 5 s and every task change.
// With thousands of jobs and a hundred dashboards open, the server built
// and wrote the whole table a hundred times every 10 s, for pages that
// threw it away. Each page now asks the stream for what it shows, and
// this counts, at the browser's network, what each page is sent while a
// client that asks for everything gets metric, system and tasks
// messages. The other tenant's rows never show.
func TestPageIsSentOnlyWhatItShowsInBrowser(t *testing.T) {
	auth := tokens{
		"a-token": {Name: "alice", Tenant: "acme", Role: httpapi.RoleAdmin},
		"g-token": {Name: "gina", Tenant: "globex", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	d.hub.Stop(context.Background())
	d.metrics, d.systemEvery = tenantMetrics{}, 200*time.Millisecond
	d.startStream()
	start := time.Now()
	d.reportAs("a-token", run("etl", "etl-1", "failed", start, time.Second)...)
	d.reportAs("g-token", run("etl", "etl-g", "failed", start, time.Second)...)

	b := newBrowser(t)
	page := b.watchStream()
	all := d.streamAll("a-token")
	b.signIn(d.srv.URL+"/", "a-token")

	fed := 0
	// feed reports a new run of another job for each tenant, so that the
	// stream has task changes to send while the page is watched.
	feed := func() {
		fed++
		for _, tok := range []string{"a-token", "g-token"} {
			d.reportAs(tok, fmt.Sprintf(`{"taskID":"feed-%d","name":"feed","sequence":1,"status":"running","ts":%d}`, fed, time.Now().UnixMilli()))
		}
	}
	// after waits until the yardstick client has been sent at least n
	// more messages of each kind than in from, feeding runs meanwhile.
	after := func(from map[string]int, n map[string]int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			now, short := all.get(), false
			for k, want := range n {
				short = short || now[k]-from[k] < want
			}
			if !short {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stream sent too few messages to a client that asks for all: %v, then %v", from, now)
			}
			feed()
			// A report for each message the yardstick is sent: the
			// stream's own ticks (metric every 100 ms) pace the feed.
			select {
			case <-all.changed:
			case <-time.After(time.Until(deadline)):
			}
		}
	}
	pages := []struct {
		open, ready string
		wants       []string // of tasks, metric, system
	}{
		{"/", `!!document.querySelector("#board tr[data-job]")`, []string{"tasks"}},
		{"/overview", `!!document.querySelector("#count-failed")`, []string{"tasks"}},
		{"/tasks", `!!document.querySelector('tr[data-task="etl-1"]') && !document.querySelector('tr[data-task="etl-g"]')`, []string{"tasks"}},
		{"/tasks/etl-1", `document.querySelectorAll("#timeline li").length === 2`, nil}, // its own changes only: the feed is another job
		{"/alerts", text("main") + `.includes("No silences")`, nil},
		{"/rules", text("main") + `.includes("Edit rules")`, nil},
		{"/expectations", text("main") + `.includes("not available")`, nil},
		{"/jobs", `!!document.querySelector('#jobs-table tr[data-job="pushed_acme"]') && !document.querySelector('#jobs-table tr[data-job="pushed_globex"]')`, []string{"metric"}},
		{"/system", `!!document.querySelector("#sys-stream")`, []string{"system"}},
	}
	for _, p := range pages {
		if p.open == "/tasks/etl-1" {
			b.do("open the task", chromedp.Navigate(d.srv.URL+p.open))
		} else {
			b.goTo(p.open)
		}
		b.until(p.open+" shown", p.ready)
		// The page's subscription goes out when it opens (the Tasks page
		// after 250 ms of quiet in its filters): let the stream tick a
		// few times before counting.
		after(all.get(), map[string]int{"metric": 5})
		from, was := all.get(), page.get()
		after(from, map[string]int{"metric": 10, "system": 3, "tasks": 3})
		got := page.get()
		for _, kind := range []string{"tasks", "metric", "system"} {
			n := got[kind] - was[kind]
			want := false
			for _, w := range p.wants {
				want = want || w == kind
			}
			// One may have been on its way when the subscription changed.
			if !want && n > 1 {
				t.Errorf("%s: sent %d %s messages, which it does not show (a client asking for all got %d)", p.open, n, kind, all.get()[kind]-from[kind])
			}
			if want && n == 0 {
				t.Errorf("%s: sent no %s message, which it shows", p.open, kind)
			}
		}
	}
}
