package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// gateStream makes every page the browser opens from now on hold the
// stream messages it receives while window.__gate.hold is set, in order
// in window.__gate.queue ({type, deliver}), count the hellos, and note
// each message handed to the page, once handled, in window.__gate.seen
// ({type, prefix}). window.__gate.inject(m) hands the page the message m
// as if the newest stream had received it.
// window.__gate.passUntil(type) hands the page the messages held before
// the first of that type, drops the rest, stops holding and closes the
// stream: a connection that dropped while those were on their way.
func (b *browser) gateStream() {
	b.t.Helper()
	const script = `(() => {
  const g = window.__gate = { hold: false, queue: [], ws: null, hellos: 0, seen: [] };
  const set = Object.getOwnPropertyDescriptor(WebSocket.prototype, "onmessage").set;
  Object.defineProperty(WebSocket.prototype, "onmessage", { configurable: true, set(fn) {
    const ws = this;
    g.ws = ws;
    set.call(ws, (e) => {
      let m = {};
      try { m = JSON.parse(e.data); } catch {}
      const type = m.type || "";
      const deliver = () => { fn.call(ws, e); g.seen.push({ type, prefix: m.prefix }); };
      g.inject = (x) => { fn.call(ws, new MessageEvent("message", { data: JSON.stringify(x) })); g.seen.push({ type: x.type, prefix: x.prefix }); };
      if (type === "hello") g.hellos++;
      if (g.hold) { g.queue.push({ type, deliver }); return; }
      deliver();
    });
  } });
  g.passUntil = (type) => {
    const q = g.queue;
    g.queue = [];
    g.hold = false;
    for (const m of q) { if (m.type === type) break; m.deliver(); }
    g.ws.close();
  };
})();`
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
		b.t.Fatal(err)
	}
}

// The Tasks page changed its prefix while a change of the old one was on
// its way: the page took that message's cursor as the new filter's, and
// when the stream dropped before the new filter's snapshot came, the next
// connection resumed the new filter from that cursor. The server sent
// what changed since (nothing), and the runs of the new prefix reported
// before it never showed. The page now takes tasks and cursors only from
// the messages that follow the answer to its last subscribe. The other
// tenant's runs of the same prefix never show.
func TestNewFilterTakesNoCursorOfTheOldInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	now := time.Now().UnixMilli()
	running := func(id, job string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":%q,"sequence":1,"status":"running","ts":%d}`, id, job, now)
	}
	d.reportAs("admin-token", running("a-1", "a"), running("b-1", "b"))
	d.reportAs("b-token", running("b-other", "b"))
	b := newBrowser(t)
	b.gateStream()
	b.signIn(d.srv.URL+"/tasks?prefix=a", "admin-token")
	rows := `document.querySelectorAll("#tasks-table tbody tr").length`
	b.until("the runs of a", rows+` === 1 && !!document.querySelector('tr[data-task="a-1"]')`)

	// A change under a, held on its way; then the prefix b, whose
	// snapshot the server has sent when it is held too.
	b.do("hold the stream", chromedp.Evaluate[chromedp.Void](`window.__gate.hold = true`))
	d.reportAs("admin-token", running("a-2", "a"))
	b.until("the change of a, held", `window.__gate.queue.some((m) => m.type === "tasks")`)
	b.do("the prefix b", setValue("#f-prefix", "b", "input"))
	b.until("the snapshot of b, held", `window.__gate.queue.some((m) => m.type === "snapshot")`)
	// The page gets the change of a, and the stream drops before the
	// snapshot of b reaches it.
	b.do("the change of a, then a drop", chromedp.Evaluate[chromedp.Void](`window.__gate.passUntil("snapshot")`))

	b.until("connected again, with the runs of b", `window.__gate.hellos === 2 && document.querySelector("#conn")?.dataset.state === "open" && `+
		rows+` === 1 && !!document.querySelector('tr[data-task="b-1"]')`)
	d.reportAs("b-token", running("b-other-2", "b"))
	d.reportAs("admin-token", running("b-2", "b"))
	b.until("live, the tenant's runs of b alone", `(() => { const r = [...document.querySelectorAll("#tasks-table tbody tr")].map((x) => x.dataset.task).sort().join();
		return r === "b-1,b-2"; })()`)
	b.screenshot("new-filter-after-a-drop")
}

// A subscribe the server refuses is answered by an error naming the
// field, and the server keeps the filter it had. The page counted the
// subscribe as unanswered for good: every later answer was taken for
// that one's and dropped, and the page stopped following the stream
// until the next reconnect. Here a link to the Tasks page carries a
// status the server does not know; the user then picks one it does: the
// page shows its runs, live, none of the other tenant's.
func TestRefusedFilterIsAnsweredInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	now := time.Now().UnixMilli()
	report := func(token, id, status string) {
		d.reportAs(token, fmt.Sprintf(`{"taskID":%q,"name":"r","sequence":1,"status":%q,"ts":%d}`, id, status, now))
	}
	report("admin-token", "r-1", "running")
	report("admin-token", "r-failed", "failed")
	report("b-token", "r-other", "running")
	b := newBrowser(t)
	b.gateStream()
	b.signIn(d.srv.URL+"/tasks?status=bogus", "admin-token")
	b.until("the refusal", `window.__gate.seen.some((m) => m.type === "error")`)
	if got := b.eval(`document.querySelector(".toast")?.innerText ?? ""`); !strings.Contains(got, `filter.status: unknown status "bogus"`) {
		t.Errorf("the page does not say the server refused its filter: %q", got)
	}

	b.do("the status running", setValue("#f-status", "running", "change"))
	rows := `[...document.querySelectorAll("#tasks-table tbody tr")].map((x) => x.dataset.task).sort().join()`
	b.until("the running runs", rows+` === "r-1"`)
	report("b-token", "r-other-2", "running")
	report("admin-token", "r-2", "running")
	b.until("live, the tenant's running runs", rows+` === "r-1,r-2"`)
}
