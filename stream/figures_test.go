package stream

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A client that (re)connects or changes its filter is sent the system
// figures and the metrics it asks for at once, after the answer to its
// subscribe: they came only on their timers, so a dashboard showed
// nothing, or a killed process's figures, for up to 5 or 10 s. The
// timers are an hour here: only the subscribe can bring them. Each tenant
// is sent its own, for the prefix of its filter, and a filter that does
// not ask for them is not sent them.
func TestStreamFiguresOnSubscribe(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, func(o *Options) {
		o.SystemInterval, o.MetricsInterval, o.HeartbeatInterval = time.Hour, time.Hour, -1
		o.Metrics = fakeMetrics{}
		o.System = func(tenant string) any { return map[string]string{"tenant": tenant} }
	})
	figures := func(c *wsClient, tenant, prefix string) {
		t.Helper()
		if m := c.read(); m.Type != apiclient.MsgSystem || string(m.Stats) != `{"tenant":"`+tenant+`"}` {
			t.Fatalf("tenant %s: %+v, want its system figures", tenant, m)
		}
		if m := c.read(); m.Type != apiclient.MsgMetric || string(m.Summaries) != `{"prefix":"`+prefix+`","tenant":"`+tenant+`"}` {
			t.Fatalf("tenant %s: %+v, want its metrics under %q", tenant, m, prefix)
		}
	}
	a := e.dial("view-a")
	a.subscribe(sub{"type": "subscribe", "filter": map[string]any{"prefix": "etl", "types": []string{"tasks", "system", "metric"}}})
	figures(a, "a", "etl")
	b := e.dial("view-b")
	b.send(sub{"type": "subscribe", "filter": map[string]any{"prefix": "load", "types": []string{"system", "metric"}}})
	figures(b, "b", "load")

	// A new filter: the figures again, under its prefix.
	a.send(sub{"type": "subscribe", "filter": map[string]any{"prefix": "x", "types": []string{"metric", "system"}}})
	figures(a, "a", "x")
	// Metrics alone, then neither: what the filter asks for, nothing more
	// (the ack's answer comes next).
	b.send(sub{"type": "subscribe", "filter": map[string]any{"prefix": "y", "types": []string{"metric"}}})
	if m := b.read(); m.Type != apiclient.MsgMetric || !strings.Contains(string(m.Summaries), `"prefix":"y"`) {
		t.Fatalf("metrics alone: %+v", m)
	}
	b.send(sub{"type": "subscribe", "filter": map[string]any{"types": []string{"alert"}}})
	b.send(sub{"type": "ack", "alert": "x"})
	if m := b.read(); m.Type != apiclient.MsgAckResult {
		t.Fatalf("a filter without figures was sent %+v", m)
	}
}

// heldMetrics answers as fakeMetrics, except, once armed, its next
// answer for one tenant and prefix, which waits until released.
type heldMetrics struct {
	tenant, prefix string
	armed          atomic.Bool
	waiting        chan struct{} // closed when the held answer waits
	release        chan struct{}
	once, freed    sync.Once
}

func (m *heldMetrics) StreamSummaries(tenant, prefix string) (any, error) {
	if tenant == m.tenant && prefix == m.prefix && m.armed.Load() {
		held := false
		m.once.Do(func() { held = true })
		if held {
			close(m.waiting)
			<-m.release
		}
	}
	return fakeMetrics{}.StreamSummaries(tenant, prefix)
}

func (m *heldMetrics) let() { m.freed.Do(func() { close(m.release) }) }

// The timer asks the metrics source, without the hub's lock, for the
// prefixes its clients had when it started. A client that changed its
// prefix meanwhile was sent the new prefix's answer, then the message of
// the prefix it left, which a dashboard took as the new one's: the hub
// answers a subscribe after every message of the filter it replaces, but
// not this one. A client that left the prefix is no longer sent it; the
// other tenant's client of that prefix is, as before.
func TestMetricOfAPrefixLeftComesNotAfterTheAnswer(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
	src := &heldMetrics{tenant: "a", prefix: "etl", waiting: make(chan struct{}), release: make(chan struct{})}
	e := newStreamEnv(t, func(o *Options) {
		o.Clock, o.HeartbeatInterval, o.PingInterval = clock, -1, time.Hour
		o.Metrics = src
	})
	t.Cleanup(src.let) // before the hub stops: its timer waits in the source
	metric := func(c *wsClient, tenant, prefix string) {
		t.Helper()
		if m := c.readType(apiclient.MsgMetric); string(m.Summaries) != `{"prefix":"`+prefix+`","tenant":"`+tenant+`"}` {
			t.Fatalf("tenant %s: metric %s, want its metrics under %q", tenant, m.Summaries, prefix)
		}
	}
	onlyMetrics := func(prefix string) sub {
		return sub{"type": "subscribe", "filter": map[string]any{"prefix": prefix, "types": []string{"metric"}}}
	}
	a, b := e.dial("view-a"), e.dial("view-b")
	a.send(onlyMetrics("etl"))
	metric(a, "a", "etl")
	b.send(onlyMetrics("etl"))
	metric(b, "b", "etl")

	// The timer asks for a's metrics under etl, and waits; a's filter
	// becomes load, which is answered at once.
	src.armed.Store(true)
	clock.Advance(10 * time.Second)
	select {
	case <-src.waiting:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the timer never asked for the metrics of etl")
	}
	a.send(onlyMetrics("load"))
	metric(a, "a", "load")
	src.let()
	// The next tick's message, under load, is the next one a gets.
	clock.Advance(10 * time.Second)
	metric(a, "a", "load")
	metric(b, "b", "etl")
	metric(b, "b", "etl")
}

// The same for the system message: a client that stopped asking for it
// while the timer asked for its tenant's figures (a dashboard that left
// its System tab) was sent them after the subscribe that left them. The
// other tenant's client that asks for them gets them, as before.
func TestSystemLeftComesNotAfterTheSubscribe(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
	var armed atomic.Bool
	waiting, release := make(chan struct{}), make(chan struct{})
	var once, freed sync.Once
	let := func() { freed.Do(func() { close(release) }) }
	e := newStreamEnv(t, func(o *Options) {
		o.Clock, o.HeartbeatInterval, o.PingInterval = clock, -1, time.Hour
		o.System = func(tenant string) any {
			if tenant == "a" && armed.Load() {
				held := false
				once.Do(func() { held = true })
				if held {
					close(waiting)
					<-release
				}
			}
			return map[string]string{"tenant": tenant}
		}
	})
	t.Cleanup(let) // before the hub stops: its timer waits in the source
	system := func(c *wsClient, tenant string) {
		t.Helper()
		if m := c.readType(apiclient.MsgSystem); string(m.Stats) != `{"tenant":"`+tenant+`"}` {
			t.Fatalf("tenant %s: system %s", tenant, m.Stats)
		}
	}
	types := func(t ...string) sub { return sub{"type": "subscribe", "filter": map[string]any{"types": t}} }
	a, b := e.dial("view-a"), e.dial("view-b")
	a.send(types("system"))
	system(a, "a")
	b.send(types("system"))
	system(b, "b")

	// The timer asks for a's figures, and waits; a stops asking for them.
	armed.Store(true)
	clock.Advance(5 * time.Second)
	select {
	case <-waiting:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the timer never asked for the figures of a")
	}
	a.subscribeQuiet(types("alert"))
	let()
	// Once the next tick has reached b, the timer is done with the one
	// before: a was sent neither.
	clock.Advance(5 * time.Second)
	system(b, "b")
	system(b, "b")
	a.roundTrip()
}
