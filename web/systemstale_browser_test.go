package web_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// One read of the system figures that fails does not take the System page
// away: before, the page gave way to "Could not load the system health."
// and every figure it had went with it. Now the figures stay, and the
// failure is said above them: while the stream still sends figures, as a
// failed read only; once the stream is gone too, as stale, with the time
// of the last good read. The next good read takes the marker away.
func TestSystemPageKeepsItsFiguresWhenAReadFailsInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	var failing atomic.Bool
	d.wrap = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/system" && failing.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":{"code":"unavailable","message":"the figures are out to lunch"}}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	d.hub.Stop(t.Context())
	d.startStream() // through wrap
	d.reportAs("admin-token", run("etl", "etl-1", "success", time.Now(), time.Second)...)

	b := newBrowser(t)
	b.signIn(d.srv.URL+"/system", "admin-token")
	b.untilIn("the figures", text("#card-tasks .n")+` === "1" && !!document.querySelector("#sys-bus")`, 30*time.Second)

	failing.Store(true)
	b.untilIn("the failed read said, the stream's figures live", `document.querySelector("#sys-stale")?.dataset.stale === "false"`, 30*time.Second)
	d.hub.Stop(t.Context()) // the stream goes too: the figures are the last read's
	b.untilIn("the figures marked stale", `document.querySelector("#sys-stale")?.dataset.stale === "true"`, 30*time.Second)
	shown, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Stale:", "the figures are out to lunch", "last good read", "Ingest and tasks"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the System page after a failed read does not say %q:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "Could not load the system health") {
		t.Errorf("the System page gave way to the error:\n%s", shown)
	}
	if got, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](text("#card-tasks .n"))); got != "1" {
		t.Errorf("tasks in memory shows %q after the failed read, want the last read's 1", got)
	}
	b.screenshot("system-stale")

	failing.Store(false)
	b.untilIn("the marker gone with the next good read", `!document.querySelector("#sys-stale")`, 30*time.Second)
}
