package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// answered is one answer the server gave, as it wrote its header.
type answered struct {
	method, path, host string
	status             int
}

// answers records the status of every answer of a handler.
type answers struct {
	mu  sync.Mutex
	all []answered
}

func (a *answers) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&statusWriter{ResponseWriter: w, note: func(st int) {
			a.mu.Lock()
			a.all = append(a.all, answered{r.Method, r.URL.Path, r.Host, st})
			a.mu.Unlock()
		}}, r)
	})
}

// to returns the statuses of the answers to method path, in order.
func (a *answers) to(method, path string) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []int
	for _, x := range a.all {
		if x.method == method && x.path == path {
			out = append(out, x.status)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	note  func(int)
	noted bool
}

func (w *statusWriter) WriteHeader(st int) {
	if !w.noted {
		w.noted = true
		w.note(st)
	}
	w.ResponseWriter.WriteHeader(st)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.noted {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter } // the stream hijacks

// attackPage is what a page on another site runs against the server at
// target (issue 16.6): the two forged writes as Chromium let them through
// before, then a WebSocket to the stream.
const attackPage = `<!doctype html><title>cute cats</title><script>
(async () => {
  const target = %q;
  const forge = (path, body) => fetch(target + path,
    { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body }).catch(() => {});
  await forge("/api/v1/tasks/victim/status", '{"status":"success","reason":"forged"}');
  await forge("/api/v1/silences", '{"rule":"etl_failures","duration":"8760h","comment":"forged"}');
  await new Promise((done) => {
    const ws = new WebSocket(target.replace("http", "ws") + "/api/v1/stream", ["apollo.v1"]);
    ws.onopen = () => { window.streamOpened = true; ws.close(); };
    ws.onclose = () => done();
  });
  document.title = "done";
})();
</script>`

// TestCrossSiteInBrowser: in the default mode (no tokens), a page from
// another site opened in Chromium can neither correct a task nor create a
// silence nor open the stream; a page on a domain rebound to 127.0.0.1
// reads nothing; and the dashboard itself still corrects a task.
func TestCrossSiteInBrowser(t *testing.T) {
	d := newDashboard(t, nil)
	evs := []apollo.Event{{TaskID: "victim", Name: "payroll", Sequence: 1, Status: apollo.StatusRunning, Ts: 1_764_400_000_000},
		{TaskID: "victim", Sequence: 2, Status: apollo.StatusFailed, Ts: 1_764_400_001_000}}
	if err := d.bus.Publish(context.Background(), evs, make([]bus.Outcome, len(evs))); err != nil {
		t.Fatal(err)
	}
	var seen answers
	recorded := seen.wrap(*d.api.Load())
	d.api.Store(&recorded)
	srv, b, eng := d.srv, d.bus, d.alerts
	// Another site: localhost is not the same site as 127.0.0.1.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, attackPage, srv.URL)
	}))
	t.Cleanup(attacker.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	br := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP rebound.test 127.0.0.1"))
	status := func() apollo.Status {
		task, err := b.Get("", "victim")
		if err != nil {
			t.Fatal(err)
		}
		return task.Status
	}

	br.do("open the other site", chromedp.Navigate(strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)+"/"))
	br.until("the page's requests", `document.title === "done"`)
	for _, path := range []string{"/api/v1/tasks/victim/status", "/api/v1/silences"} {
		if got := seen.to("POST", path); len(got) != 1 || got[0] != http.StatusForbidden {
			t.Errorf("POST %s from the other site was answered %v, want [403]", path, got)
		}
	}
	if got := seen.to("GET", "/api/v1/stream"); len(got) != 1 || got[0] != http.StatusForbidden {
		t.Errorf("the stream from the other site was answered %v, want [403]", got)
	}
	if opened, _ := chromedp.Run(br.ctx, chromedp.Evaluate[bool](`!!window.streamOpened`)); opened {
		t.Error("the other site's page opened the stream")
	}
	if s := status(); s != apollo.StatusFailed {
		t.Errorf("the other site's page corrected the task to %s", s)
	}
	if n := len(eng.Silences("")); n != 0 {
		t.Errorf("the other site's page created %d silences", n)
	}

	// DNS rebinding: rebound.test resolves to 127.0.0.1, so its page is
	// same-origin with what it asks for; the Host names it.
	br.do("open the rebound name", chromedp.Navigate("http://rebound.test:"+port+"/"))
	read, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`fetch("/api/v1/tasks/victim").then((r) => r.status)`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`fetch("/api/v1/tasks/victim/status", { method: "POST",
		headers: { "Content-Type": "application/json" }, body: '{"status":"success","reason":"rebound"}' }).then((r) => r.status)`,
		chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	opened, err := chromedp.Run(br.ctx, chromedp.Evaluate[bool](`new Promise((done) => {
		const ws = new WebSocket("ws://" + location.host + "/api/v1/stream", ["apollo.v1"]);
		ws.onopen = () => { ws.close(); done(true); };
		ws.onclose = () => done(false);
	})`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if read != http.StatusForbidden || wrote != http.StatusForbidden || opened || status() != apollo.StatusFailed {
		t.Errorf("a page on a rebound name read %d, wrote %d, opened the stream %v; the task is %s", read, wrote, opened, status())
	}

	// The dashboard itself: its stream opens and its correction form works.
	br.do("open the dashboard", chromedp.Navigate(srv.URL+"/tasks/victim"))
	br.until("the stream", `document.querySelector("#conn")?.dataset.state === "open"`)
	br.until("the correction form", `!!document.querySelector("details.panel form")`)
	br.do("correct the task", chromedp.Click(chromedp.CSS("details.panel summary")),
		chromedp.SetValue(chromedp.CSS(`details.panel select[name="status"]`), "success"),
		chromedp.SendKeys(chromedp.CSS(`details.panel input[name="reason"]`), "checked by hand"),
		chromedp.Click(chromedp.CSS(`details.panel button[type="submit"]`)))
	br.until("corrected", text(`details.panel [role="status"]`)+` === "Corrected."`)
	if s := status(); s != apollo.StatusSuccess {
		t.Errorf("the dashboard's correction left the task %s", s)
	}
}
