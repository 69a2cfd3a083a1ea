package web_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// deceiving is what no page may show raw: a character that reorders,
// hides or breaks the text around it (C0, DEL, C1, the bidi controls, the
// line and paragraph separators), as a JavaScript pattern.
const deceiving = `/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/`

// shownRaw is a JavaScript test that the page shows such a character, in
// its text or in a tooltip (newlines and tabs of the layout aside).
const shownRaw = `(() => { const re = ` + deceiving + `;
	return re.test(document.body.innerText) || [...document.querySelectorAll("[title], [aria-label]")].some((e) =>
		re.test(e.getAttribute("title") || "") || re.test(e.getAttribute("aria-label") || "")); })()`

// Reporters choose task IDs, job names, extra and comments. A bidi
// override in them would make "invoice\u202Efdp.exe" read
// "invoiceexe.pdf", and a control character hide what follows: every page
// that shows them shows those characters as escapes, as the CLI does.
func TestHostileTextInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	b := newBrowser(t)
	const id, job = "etl-invoice\u202efdp.exe", "etl\u202ereport\x07"
	start := time.Now()
	extra, _ := json.Marshal(map[string]string{"note\u202e": "a\u2066b\u0085c"})
	d.reportAs("admin-token",
		fmt.Sprintf(`{"taskID":%s,"name":%s,"sequence":1,"status":"running","ts":%d}`, jsString(id), jsString(job), start.UnixMilli()),
		fmt.Sprintf(`{"taskID":%s,"name":%s,"sequence":2,"status":"failed","ts":%d,"extra":%s}`, jsString(id), jsString(job), start.Add(time.Second).UnixMilli(), extra))
	d.post("admin-token", "/api/v1/silences", `{"rule":"etl_failures","duration":"1h","comment":"ask \u202eevilmallory"}`)

	b.signIn(d.srv.URL+"/", "admin-token")
	escaped := `\u202e`
	check := func(what, ready string) {
		t.Helper()
		b.until(what, ready)
		b.until(what+": the override shown as an escape", `document.body.innerText.includes(`+jsString(escaped)+`)`)
		b.until(what+": no raw control or bidi character", `!`+shownRaw)
	}
	check("the board", `!!document.querySelector("#board tr[data-job]")`)
	b.goTo("/tasks")
	check("the tasks", `!!document.querySelector("#tasks-table tbody tr")`)
	b.do("open the task by its link", chromedp.Navigate(d.srv.URL+"/tasks/"+url.PathEscape(id)))
	check("the task", `document.querySelectorAll("#timeline li").length === 2`)
	b.until("the extra's escapes", text("#timeline pre")+`.includes("note\\u202e") && `+text("#timeline pre")+`.includes("a\\u2066b\\u0085c")`)
	b.screenshot("task")
	b.goTo("/alerts")
	check("the alerts and the silence", `!!document.querySelector("tr[data-alert]") && !!document.querySelector("#silences")`)
	b.until("the comment", text("#silences")+`.includes("ask \\u202eevilmallory")`)
	b.screenshot("alerts")
	b.goTo("/jobs")
	check("the jobs", `!!document.querySelector("#jobs-table tr[data-job]")`)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// Names without spaces as long as the protocol allows keep every page
// within the window: the name wraps, the other fields stay in their place.
func TestLongNamesInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	b := newBrowser(t)
	id, job := "etl-"+strings.Repeat("x", 250), "etl_"+strings.Repeat("y", 250)
	d.reportAs("admin-token", run(job, id, "failed", time.Now(), time.Second)...)
	d.post("admin-token", "/api/v1/silences", `{"rule":"etl_failures","duration":"1h","comment":"`+strings.Repeat("z", 500)+`"}`)
	b.signIn(d.srv.URL+"/", "admin-token")
	fits := `document.documentElement.scrollWidth <= innerWidth`
	b.until("the board", `!!document.querySelector("#board tr[data-job]")`)
	b.until("the board fits", fits)
	b.goTo("/tasks")
	b.until("the tasks", `!!document.querySelector("#tasks-table tbody tr")`)
	b.until("the tasks fit", fits)
	b.do("open the task", chromedp.Navigate(d.srv.URL+"/tasks/"+url.PathEscape(id)))
	b.until("the task", `document.querySelectorAll("#timeline li").length === 2`)
	b.screenshot("task")
	b.until("the task fits", fits)
	b.goTo("/alerts")
	b.until("the alerts", `!!document.querySelector("tr[data-alert]") && !!document.querySelector("#silences")`)
	b.until("the alerts fit", fits)
	b.do("open the job", chromedp.Navigate(d.srv.URL+"/jobs/"+url.PathEscape(job)))
	b.until("the job", `!!document.querySelector("#job-health")`)
	b.screenshot("job")
	b.until("the job fits", fits)
}
