package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apollo-11/apollo/httpapi"
)

// The Tasks page filtered by a status drops a task that leaves it: a run
// shown under "running" that finished, a run shown under "failed" that an
// operator corrected. The stream sent a filtered client only the changes
// into its statuses, so the row stayed "running" for ever while the API
// said success. The other tenant's runs never show.
func TestTaskLeavesTheStatusFilterInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	b := newBrowser(t)
	start := time.Now()
	running := func(id string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":"etl","sequence":1,"status":"running","ts":%d}`, id, start.UnixMilli())
	}
	d.reportAs("admin-token", running("etl-1"), running("etl-2"))
	d.reportAs("b-token", running("etl-b"))
	b.signIn(d.srv.URL+"/tasks?status=running", "admin-token")
	b.until("the two running runs", `document.querySelectorAll("#tasks-table tbody tr").length === 2`)

	// etl-1 finishes while the page is open, and fails; etl-2 goes on.
	d.reportAs("admin-token", run("etl", "etl-1", "failed", start, time.Second)[1])
	d.reportAs("b-token", run("etl", "etl-b", "success", start, time.Second)[1])
	b.until("the finished run gone", `!document.querySelector('tr[data-task="etl-1"]') && !!document.querySelector('tr[data-task="etl-2"]')`)
	b.screenshot("running")

	// Under "failed", an operator's correction takes it out again.
	b.do("failed runs", setValue("#f-status", "failed", "change"))
	b.until("the failed run", `!!document.querySelector('tr[data-task="etl-1"]') && document.querySelectorAll("#tasks-table tbody tr").length === 1`)
	d.post("admin-token", "/api/v1/tasks/etl-1/status", `{"status":"success","reason":"the retry succeeded"}`)
	b.until("the corrected run gone", `!document.querySelector('tr[data-task="etl-1"]') && `+text("main")+`.includes("No task matches.")`)
	b.do("every run", setValue("#f-status", "", "change"))
	b.until("every run of the tenant, as the API has them", `document.querySelectorAll("#tasks-table tbody tr").length === 2 && `+
		`document.querySelector('tr[data-task="etl-1"] .st')?.textContent === "success" && `+
		`document.querySelector('tr[data-task="etl-2"] .st')?.textContent === "running" && !document.querySelector('tr[data-task="etl-b"]')`)
}
