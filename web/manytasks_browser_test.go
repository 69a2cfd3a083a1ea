package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// With 100 000 tasks the Tasks page showed the newest 500 and nothing
// more: it did not say the list was cut, and the older runs could only be
// found by filtering. It now says how many it shows, that there are more,
// and Show more reads the next ones from GET /api/v1/tasks, page by page,
// newest first as the API lists them, each run once. The other tenant's
// runs never show, whatever the page.
func TestManyTasksInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	const n = 100_000
	now := time.Now().UnixMilli()
	var evs []string
	for i := range n {
		evs = append(evs, fmt.Sprintf(`{"taskID":"t%06d","name":"job-%03d","sequence":1,"status":"running","ts":%d}`, i, i%100, now))
		if len(evs) == 4000 || i == n-1 {
			d.reportAs("admin-token", evs...)
			evs = evs[:0]
		}
	}
	// Tenant b's runs are newer than all of the first tenant's, and named
	// like them.
	d.reportAs("b-token", fmt.Sprintf(`{"taskID":"t099999b","name":"job-000","sequence":1,"status":"running","ts":%d}`, now),
		fmt.Sprintf(`{"taskID":"t000000b","name":"job-000","sequence":1,"status":"running","ts":%d}`, now))

	b := newBrowser(t)
	b.signIn(d.srv.URL+"/tasks", "admin-token")
	rows := `document.querySelectorAll("#tasks-table tbody tr")`
	// in order: every row's task, newest first, each once, none of b's
	inOrder := func(count int) string {
		return fmt.Sprintf(`(() => { const r = [...%s].map((x) => x.dataset.task);
			return r.length === %d && r.every((id, i) => id === "t" + String(%d - i).padStart(6, "0")); })()`, rows, count, n-1)
	}
	b.until("the newest 500, saying there are more", inOrder(500)+` && `+text("#task-count")+`.includes("500 shown") && `+
		text(".more-tasks")+`.includes("more") && !!document.querySelector(".more-tasks button")`)
	b.screenshot("first-page")
	for _, count := range []int{1000, 1500} {
		b.do("show more", chromedp.Click(chromedp.CSS(".more-tasks button")))
		b.until(fmt.Sprintf("the next page: %d rows", count), inOrder(count)+` && `+text("#task-count")+fmt.Sprintf(`.includes("%s shown")`, map[int]string{1000: "1,000", 1500: "1,500"}[count]))
	}
	b.screenshot("three-pages")

	// A prefix that 100 runs match: all of them, and nothing more to ask.
	b.do("filter", setValue("#f-prefix", "t0000", "input"))
	b.until("the 100 runs of the prefix, all of them", rows+`.length === 100 && !document.querySelector(".more-tasks button") && `+
		`document.querySelector("#tasks-table tbody tr")?.dataset.task === "t000099" && !document.querySelector('tr[data-task$="b"]')`)
	// The oldest runs are reachable by paging with a filter that many match.
	b.do("filter", setValue("#f-prefix", "t00", "input"))
	b.until("the newest 500 of the prefix", rows+`.length === 500 && document.querySelector("#tasks-table tbody tr")?.dataset.task === "t009999"`)
	b.do("show more", chromedp.Click(chromedp.CSS(".more-tasks button")))
	b.until("the next 500 of the prefix", rows+`.length === 1000 && document.querySelector("#tasks-table tbody tr:last-child")?.dataset.task === "t009000" && `+
		`!document.querySelector('tr[data-task$="b"]')`)
	b.screenshot("prefix")

	// Signed in as the other tenant in a second tab, the first shows that
	// tenant's runs, and none of the ones it read page by page, not even
	// for one frame.
	b.do("watch the rows", chromedp.Evaluate[chromedp.Void](`window.leaked = [];
		new MutationObserver(() => {
			if (document.querySelector("#who")?.textContent !== "bob (admin)") return;
			for (const r of document.querySelectorAll("#tasks-table tbody tr")) if (!r.dataset.task.endsWith("b")) window.leaked.push(r.dataset.task);
		}).observe(document.querySelector("main"), { childList: true, subtree: true, characterData: true });`))
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	second := &browser{t: t, ctx: ctx, shot: b.shot, errs: make(chan string, 1)}
	second.do("open the site in a second tab", chromedp.Navigate(d.srv.URL+"/"))
	second.until("signed in with the browser's token", `document.querySelector("#conn")?.dataset.state === "open"`)
	second.do("forget the token", chromedp.Evaluate[chromedp.Void](`localStorage.clear()`), chromedp.Reload())
	second.signInAgain("b-token")
	b.until("the first tab follows", text("#who")+` === "bob (admin)"`)
	b.do("every run", setValue("#f-prefix", "", "input"))
	b.until("the other tenant's runs only", rows+`.length === 2 && [...`+rows+`].every((r) => r.dataset.task.endsWith("b")) && `+
		`!document.querySelector(".more-tasks button")`)
	if got := b.eval(`window.leaked.slice(0, 5).join(" ")`); got != "" {
		t.Errorf("the first tenant's runs drawn for the other: %s", got)
	}
}
