package stream

import (
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
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
