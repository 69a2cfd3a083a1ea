package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo"
)

// holdAlertReads makes the API hold its answers to GET /api/v1/alerts
// while hold is set: each is read when asked and written when its
// channel, sent on held, is closed.
func (d *dashboard) holdAlertReads(hold *atomic.Bool) <-chan chan struct{} {
	held := make(chan chan struct{}, 16)
	d.wrap = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !hold.Load() || r.Method != http.MethodGet || r.URL.Path != "/api/v1/alerts" {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			release := make(chan struct{})
			held <- release
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	}
	return held
}

// firingID waits for a firing alert of the default tenant's etl_failures
// with group and returns its ID.
func (d *dashboard) firingID(group string) string {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, a := range d.alerts.Alerts("", apollo.AlertFiring) {
			if a.Rule == "etl_failures" && (group == "" || a.Group == group) {
				return a.ID
			}
		}
		select {
		case <-d.t.Context().Done():
		case <-time.After(10 * time.Millisecond): // polling the engine's state with a deadline
		}
	}
	d.t.Fatalf("etl_failures did not fire: %+v", d.alerts.Alerts("", ""))
	return ""
}

// The Alerts page read the alerts on a reconnect twice: the stream's read
// replaced what the page held, the page's own only added to it. The page's
// read, answered after an alert changed on the stream, put back the alert
// as it was before: acknowledged while the reads were under way, it showed
// unacknowledged (and Ack again) for good. Every read now replaces what
// the page holds with the API's answer plus the changes the stream
// delivered since it was asked; a read overtaken by a newer one is dropped.
func TestAlertReadAfterAChangeInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	var hold atomic.Bool
	held := d.holdAlertReads(&hold)
	d.putRules("admin-token", dashboardRules+"RULE zz_failures task_prefix: \"zz\" ON: failed NOTIFY: console\n")
	start := time.Now()
	d.reportAs("admin-token", run("etl", "etl-1", "failed", start, time.Second)...)
	id := d.firingID("")
	row := `tr[data-alert="` + id + `"]`
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/alerts", "admin-token")
	b.until("the alert, not acknowledged", `!!document.querySelector('`+row+` button.ack')`)

	// The server restarts. The stream's read of the alerts is answered;
	// the page's, asked next (the browser asks one address once at a
	// time), only after the alert was acknowledged, with what it read
	// before.
	reads := `performance.getEntriesByType("resource").filter((e) => new URL(e.name).pathname === "/api/v1/alerts" && e.responseEnd > 0).length`
	before := b.eval(`String(` + reads + `)`)
	hold.Store(true)
	d.down()
	d.up()
	var releases []chan struct{}
	for len(releases) < 2 {
		select {
		case r := <-held:
			releases = append(releases, r)
			if len(releases) == 1 {
				close(r)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d reads of the alerts after the reconnect, want 2", len(releases))
		}
	}
	hold.Store(false)
	d.post("admin-token", "/api/v1/alerts/"+id+"/ack", "")
	b.until("acknowledged, from the stream", text(row+` td.acked`)+` === "by root"`)
	close(releases[1])
	b.until("both reads answered", reads+` >= `+before+` + 2`)
	// Another alert fires and shows: the page has handled the answers.
	d.reportAs("admin-token", run("zz", "zz-1", "failed", start, time.Second)...)
	b.until("the next alert", `document.querySelectorAll("tr[data-alert]").length === 2`)
	if got := b.eval(text(row + ` td.acked`)); got != "by root" {
		b.screenshot("stale")
		t.Fatalf("the acknowledged alert shows %q after the reads, want by root", got)
	}
}

// The stream closed after the server made an ack and before its answer
// came: the page said "Could not acknowledge: the connection closed",
// although the alert was acknowledged. It now says that it does not know
// yet, and, connected again, whether the alert was acknowledged.
func TestAckAnsweredAfterTheStreamClosedInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	made := make(chan struct{}, 1)
	answer := make(chan struct{})
	d.acked = func() {
		made <- struct{}{}
		<-answer
	}
	d.startStream() // with the hook
	start := time.Now()
	d.reportAs("admin-token", run("etl", "etl-1", "failed", start, time.Second)...)
	id := d.firingID("")
	row := `tr[data-alert="` + id + `"]`
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/alerts", "admin-token")
	b.until("the alert, not acknowledged", `!!document.querySelector('`+row+` button.ack')`)

	b.do("ack", chromedp.Click(chromedp.CSS(row+` button.ack`)))
	select {
	case <-made:
	case <-time.After(20 * time.Second):
		t.Fatal("the ack did not reach the engine")
	}
	// The server goes down before the answer is written.
	down := make(chan struct{})
	go func() { d.down(); close(down) }()
	b.until("the stream closed", `document.querySelector("#conn")?.dataset.state !== "open"`)
	close(answer)
	<-down
	b.until("the page says it does not know yet", text(".toast")+`.includes("may have been")`)
	if got := b.eval(text(".toast")); strings.Contains(got, "Could not acknowledge") {
		t.Errorf("the toast says %q of an ack that was made", got)
	}
	b.screenshot("unknown")
	d.acked = nil
	d.up()
	b.until("connected again, it says the alert was acknowledged", text(".toast")+`.includes("Acknowledged") && `+text(row+` td.acked`)+` === "by root"`)
	b.screenshot("confirmed")
}
