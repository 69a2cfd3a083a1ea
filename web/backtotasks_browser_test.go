package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// Tasks, a task, back to Tasks: each return subscribed afresh, and the
// server listed and sent the newest 500 tasks again (about 130 KB of JSON
// for runs with a few fields), for a table the page had a moment before.
// The page now goes back to the tasks it held and resumes from their
// cursor: the server sends what changed meanwhile. A run reported while
// the task was open shows once back, the other tenant's never.
func TestBackToTheTasksResumesInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	now := time.Now().UnixMilli()
	var evs []string
	for i := range 600 {
		evs = append(evs, fmt.Sprintf(`{"taskID":"t%04d","name":"job-%02d","sequence":1,"status":"running","ts":%d}`, i, i%10, now))
	}
	d.reportAs("admin-token", evs...)
	b := newBrowser(t)
	frames := b.watchStream()
	b.signIn(d.srv.URL+"/tasks", "admin-token")
	rows := `document.querySelectorAll("#tasks-table tbody tr").length`
	b.until("the newest 500", rows+` === 500 && !!document.querySelector('tr[data-task="t0599"]')`)
	b.do("open a task", chromedp.Click(chromedp.CSS(`tr[data-task="t0599"] a`)))
	b.until("the task", `!!document.querySelector("#timeline li")`)
	// The task page's own snapshot (its ID as the prefix) has come when
	// its change shows.
	d.reportAs("admin-token", `{"taskID":"t0599","name":"job-09","sequence":2,"status":"success","ts":`+fmt.Sprint(now+1)+`}`)
	b.until("the task's change", text("h1")+`.includes("success")`)
	snapshots := frames.get()["snapshot"]
	d.reportAs("admin-token", fmt.Sprintf(`{"taskID":"t-meanwhile","name":"job-00","sequence":1,"status":"running","ts":%d}`, now+2))
	d.reportAs("b-token", fmt.Sprintf(`{"taskID":"t-other","name":"job-00","sequence":1,"status":"running","ts":%d}`, now+2))

	b.do("back", chromedp.Evaluate[chromedp.Void](`history.back()`))
	b.until("the tasks again, with the run reported meanwhile and the task's change",
		`location.pathname === "/tasks" && !!document.querySelector('tr[data-task="t-meanwhile"]') && `+
			`(document.querySelector('tr[data-task="t0599"] td[data-label="Status"]')?.textContent ?? "") === "success"`)
	d.reportAs("admin-token", fmt.Sprintf(`{"taskID":"t-after","name":"job-00","sequence":1,"status":"running","ts":%d}`, now+3))
	b.until("live", `!!document.querySelector('tr[data-task="t-after"]')`)
	if got := frames.get()["snapshot"]; got != snapshots {
		t.Errorf("back on the tasks, the page was sent %d more snapshots, want none", got-snapshots)
	}
	b.until("the newest 500, each once, none of the other tenant's",
		`(() => { const r = [...document.querySelectorAll("#tasks-table tbody tr")].map((x) => x.dataset.task);
			return new Set(r).size === r.length && !r.includes("t-other") && r.length === 500 && r[0] === "t-after" && r[1] === "t-meanwhile"; })()`)
	b.screenshot("back-on-tasks")
}
