package web_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// heldMetrics answers the stream's metric messages with one job named
// after the tenant and the prefix, which the REST answer never has, so
// that the page shows where its rows came from. Armed (holdNext), its
// next answer for a prefix waits until released; from the release on it
// fails, and the stream sends no more metric messages.
type heldMetrics struct {
	mu      sync.Mutex
	hold    string        // the prefix whose next answer waits
	off     bool          // released: every answer fails
	waiting chan struct{} // closed when the held answer waits
	release chan struct{}
	once    sync.Once
}

func newHeldMetrics() *heldMetrics {
	return &heldMetrics{waiting: make(chan struct{}), release: make(chan struct{})}
}

func pushedJob(tenant, prefix string) string { return "pushed_" + tenant + "_" + prefix }

func (m *heldMetrics) StreamSummaries(tenant, prefix string) (any, error) {
	m.mu.Lock()
	held, off := m.hold != "" && prefix == m.hold, m.off
	if held {
		m.hold = ""
	}
	m.mu.Unlock()
	if off {
		return nil, errors.New("no metrics after the release")
	}
	if held {
		close(m.waiting)
		<-m.release
	}
	return apiclient.MetricsPage{Window: "5m0s", Prefix: prefix, Jobs: []apiclient.JobRow{{Name: pushedJob(tenant, prefix), Count: 1}}}, nil
}

func (m *heldMetrics) holdNext(prefix string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold = prefix
}

// releaseHeld lets the held answer go, and fails every later one.
func (m *heldMetrics) releaseHeld() {
	m.once.Do(func() {
		m.mu.Lock()
		m.off = true
		m.mu.Unlock()
		close(m.release)
	})
}

// The stream's metric message of the timer is asked for the filters its
// clients have when it starts; a client that changes its prefix
// meanwhile gets the new prefix's answer at once, then the old prefix's
// message. The dashboard took it as the live table: the Jobs page, whose
// filter said b, dropped the stream's rows of b for the table it had read
// (its own check saw that the message did not answer its question) until
// the next message, 10 s on. The stream client now keeps a metric message
// only when its prefix is the filter's.
func TestOldPrefixMetricIsNotTakenInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	d.hub.Stop(t.Context())
	held := newHeldMetrics()
	t.Cleanup(held.releaseHeld) // before the hub stops: its timer waits in the source
	d.metrics = held
	d.startStream()
	b := newBrowser(t)
	b.gateStream()
	b.signIn(d.srv.URL+"/jobs", "admin-token")
	filter := `main input[data-filter]`
	row := func(prefix string) string {
		return `!!document.querySelector('#jobs-table tr[data-job="` + pushedJob("", prefix) + `"]')`
	}
	b.do("the prefix a", setValue(filter, "a", "input"))
	b.until("the stream's row of a", row("a"))

	// The timer's next message for a is asked for, and waits; the page's
	// prefix becomes b, which the stream answers at once.
	held.holdNext("a")
	select {
	case <-held.waiting:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the stream's timer never asked for the metrics of a")
	}
	b.do("the prefix b", setValue(filter, "b", "input"))
	b.until("the stream's row of b", row("b")+` && !`+row("a"))
	held.releaseHeld()
	b.until("the message of a, handled", `window.__gate.seen.filter((m) => m.type === "metric").at(-1)?.prefix === "a"`)
	if got := b.eval(`String(` + row("b") + ` && !` + row("a") + `)`); got != "true" {
		b.screenshot("old-prefix-metric")
		t.Fatalf("after the late message of a, the page lost the stream's row of b: %s", b.eval(text("#jobs-table")))
	}
}
