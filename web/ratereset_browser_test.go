package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A server started again after a snapshot (a graceful restart, or a kill
// after the last checkpoint) counts its accepted events from what it
// replayed, fewer than the process before had counted. The System page
// measured its "events accepted per second" between two of its reads and
// showed the drop as a negative rate ("-4 a second") until the stream
// noticed the restart, when a read fell between the restart and the
// stream's reconnection. Here the API answers as such a new process
// would, with the stream left up: the page shows no rate rather than a
// negative one, and a rate again from the next two reads.
func TestRateAcrossACounterResetInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	var reset atomic.Bool
	d.wrap = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/system" {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if reset.Load() {
				var v map[string]map[string]any
				if err := json.Unmarshal(body, &v); err == nil && v["bus"] != nil {
					v["bus"]["accepted"] = 0 // a new process, started from a snapshot
					body, _ = json.Marshal(v)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	}
	d.hub.Stop(t.Context())
	d.startStream() // through wrap
	var evs []string
	for i := range 20 {
		evs = append(evs, run("etl", "etl-r"+strings.Repeat("x", i), "success", time.Now(), time.Second)...)
	}
	d.reportAs("admin-token", evs...)

	b := newBrowser(t)
	b.signIn(d.srv.URL+"/system", "admin-token")
	// Nothing is reported meanwhile: the rate of two reads is 0.
	b.untilIn("a rate from two reads", text("#card-rate .n")+` === "0"`, 30*time.Second)
	reset.Store(true)
	b.untilIn("the rate of the read after the reset", text("#card-rate .n")+` !== "0"`, 30*time.Second)
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](text("#card-rate .n")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(got, "-") || strings.HasPrefix(got, "−") {
		t.Errorf("the page shows a negative rate of accepted events: %q", got)
	}
	b.screenshot("rate-after-reset")
}
