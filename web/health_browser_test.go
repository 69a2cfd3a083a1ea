package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// report posts runs as an executor would, with the times given (so a run
// can have happened before the page opened), and waits until the metrics
// have them.
func (d *dashboard) report(evs ...string) { d.t.Helper(); d.reportAs("", evs...) }

// reportAs is report with a token ("": none). Every event must be taken:
// one the server refused on its own (a bad field) fails the test rather
// than leave it looking at runs that are not there.
func (d *dashboard) reportAs(token string, evs ...string) {
	d.t.Helper()
	body := d.post(token, "/api/v1/events", "["+strings.Join(evs, ",")+"]")
	var ans struct {
		Results []struct {
			Result string `json:"result"`
			Error  any    `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		d.t.Fatalf("the answer to the events: %v\n%s", err, body)
	}
	for i, r := range ans.Results {
		if r.Result != "accepted" && r.Result != "duplicate" && r.Result != "waiting" {
			d.t.Fatalf("event %d (%s) was not taken: %s %v", i, evs[i], r.Result, r.Error)
		}
	}
	if err := d.bus.Checkpoint(func(uint64) error { return nil }); err != nil {
		d.t.Fatal(err)
	}
}

// post sends a JSON body to the API with a token ("": none), wants 2xx
// and returns the answer's body.
func (d *dashboard) post(token, path, body string) []byte {
	d.t.Helper()
	req, err := http.NewRequest("POST", d.srv.URL+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	ans, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		d.t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		d.t.Fatalf("POST %s: HTTP %d %s", path, resp.StatusCode, ans)
	}
	return ans
}

// run is one run's two events: running at start, then its end.
func run(job, id, status string, start time.Time, cost time.Duration) []string {
	return []string{
		fmt.Sprintf(`{"taskID":%q,"name":%q,"sequence":1,"status":"running","ts":%d}`, id, job, start.UnixMilli()),
		fmt.Sprintf(`{"taskID":%q,"name":%q,"sequence":2,"status":%q,"ts":%d}`, id, job, status, start.Add(cost).UnixMilli()),
	}
}

// setValue sets a field's value and tells the page, as typing or
// choosing would.
func setValue(sel, value, event string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event(%q, {bubbles: true})); })()`, sel, value, event))
}

// isBad is a JavaScript test that an element's colour (or background) is
// the page's colour for failures.
func isBad(sel, prop string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false;
		const probe = document.createElement("span"); probe.style.color = getComputedStyle(document.documentElement).getPropertyValue("--bad");
		document.body.append(probe); const bad = getComputedStyle(probe).color; probe.remove();
		return getComputedStyle(e)[%q].includes(bad); })()`, sel, prop)
}

// The job health board, the charts, timeouts, alert history, the System
// page and narrow screens, in a real browser against a real bus, metrics,
// alert engine, stream and API.
func TestHealthBoardInBrowser(t *testing.T) {
	d := newDashboard(t, nil)
	now := time.Now()
	var evs []string
	// a_ok succeeds; m_hang times out every time (the bus writes timeouts
	// for runs past their deadline; here the executor reports them);
	// etl_nightly's last run failed, which fires etl_failures. By name,
	// a_ok would come first; by badness, etl_nightly.
	for i := range 3 {
		start := now.Add(-time.Duration(30-10*i) * time.Minute)
		evs = append(evs, run("a_ok", fmt.Sprintf("ok-%d", i), "success", start, time.Second)...)
		evs = append(evs, run("m_hang", fmt.Sprintf("hang-%d", i), "timeout", start, 5*time.Minute)...)
		st := "success"
		if i == 2 {
			st = "failed"
		}
		evs = append(evs, run("etl_nightly", fmt.Sprintf("etl-%d", i), st, start, 2*time.Second)...)
	}
	b := newBrowser(t)

	// The landing view is the board: empty at first, then it fills from
	// the stream, worst first.
	b.do("open the board", chromedp.Navigate(d.srv.URL+"/"))
	b.until("an empty board", `!!document.querySelector("#board-empty")`)
	d.report(evs...)
	b.until("the board", `document.querySelectorAll("#board tbody tr").length === 3`)
	b.until("worst first", `[...document.querySelectorAll("#board tbody tr")].map(r => r.dataset.job).join(",") === "etl_nightly,m_hang,a_ok"`)
	b.until("the verdicts", `[...document.querySelectorAll("#board tbody tr")].map(r => r.dataset.verdict).join(",") === "failing,timing_out,ok"`)
	b.until("three runs in each strip", `[...document.querySelectorAll("#board .strip")].every(s => s.children.length === 3)`)
	b.until("a run's ID, time, duration and status on hover",
		`document.querySelector('#board a.run[data-task="etl-2"]')?.title.startsWith("etl-2 · ") &&
		 document.querySelector('#board a.run[data-task="etl-2"]').title.endsWith("· 2.0 s · failed")`)
	// A timeout is red: the verdict and the strip's cells.
	b.until("timing out in red", isBad(`tr[data-job="m_hang"] [data-verdict]`, "color"))
	b.until("a timed-out run in red", isBad(`a.run[data-task="hang-0"]`, "backgroundImage"))
	b.until("a failed run in red", isBad(`a.run[data-task="etl-2"]`, "backgroundColor"))
	b.screenshot("board")

	// Live: a new run joins the strip at once; its failure moves the job
	// up when the verdicts are read again.
	d.report(run("a_ok", "ok-live", "failed", time.Now().Add(-time.Second), 500*time.Millisecond)...)
	b.until("the new run in the strip", `!!document.querySelector('#board a.run[data-task="ok-live"]')`)
	b.until("a_ok now failing, before m_hang",
		`[...document.querySelectorAll("#board tbody tr")].map(r => r.dataset.job).join(",") === "a_ok,etl_nightly,m_hang"`)
	// The filters: by prefix (on the server) and by verdict.
	b.do("filter by prefix", chromedp.SendKeys(chromedp.CSS("#board-prefix"), "m_"))
	b.until("only m_hang", `[...document.querySelectorAll("#board tbody tr")].map(r => r.dataset.job).join(",") === "m_hang"`)
	b.do("clear the prefix", setValue("#board-prefix", "", "input"))
	b.until("every job again", `document.querySelectorAll("#board tbody tr").length === 3`)
	b.do("only the failing", chromedp.Click(chromedp.CSS(`button[data-tally="failing"]`)))
	b.until("the failing jobs", `[...document.querySelectorAll("#board tbody tr")].map(r => r.dataset.job).join(",") === "a_ok,etl_nightly"`)
	// A run in the strip opens the run.
	b.do("open a run", chromedp.Click(chromedp.CSS(`a.run[data-task="etl-2"]`)))
	b.until("the run's page", `location.pathname === "/tasks/etl-2" && `+text("main h1")+`.includes("etl-2")`)

	checkHistoryCharts(b, d, 10)
	checkTimeoutsOnJobs(b)
	checkAlertHistory(b)
	checkSystemInWords(b)
	checkNarrow(b, d)
}

// checkHistoryCharts: a page opened now charts the runs that finished
// before it opened, from the server (runs finished in all).
func checkHistoryCharts(b *browser, d *dashboard, runs int) {
	b.do("a fresh overview", chromedp.Navigate(d.srv.URL+"/overview"))
	sum := fmt.Sprintf(`document.querySelector("#chart-throughput")?.dataset.sum === "%d"`, runs)
	b.until("the window's history", sum+` && document.querySelector("#chart-throughput").dataset.points === "360"`)
	b.until("the legend shows values, not --", `(() => { const l = document.querySelectorAll("#chart-throughput .u-legend .u-value");
		return l.length === 4 && [...l].every(v => v.textContent !== "--" && v.textContent !== ""); })()`)
	b.until("failures in red", `getComputedStyle(document.querySelector("#chart-failrate .u-legend .u-series:nth-child(2) .u-marker")).borderColor === "rgb(220, 38, 38)"`)
	b.screenshot("overview-history")
	b.do("6 hours", chromedp.Click(chromedp.CSS(`#range button[data-range="6h"]`)))
	b.until("6 hours by the minute", sum+` && document.querySelector("#chart-throughput").dataset.points === "360" &&
		document.querySelector("#chart-throughput figcaption").textContent.includes("per 1 min")`)
	b.do("24 hours", chromedp.Click(chromedp.CSS(`#range button[data-range="24h"]`)))
	b.until("24 hours by 5 minutes", sum+` && document.querySelector("#chart-throughput").dataset.points === "288"`)
}

// checkTimeoutsOnJobs: the Jobs page counts timeouts as failures and
// colours them red.
func checkTimeoutsOnJobs(b *browser) {
	b.goTo("/jobs")
	b.do("the last hour", setValue("main select", "1h", "change"))
	row := `#jobs-table tr[data-job="m_hang"]`
	b.until("m_hang's timeouts", text(row+` td.timeouts`)+` === "3" && `+text(row+` td.failure-rate`)+` === "100.0%"`)
	b.until("timeouts in red", isBad(row+` td.timeouts`, "color")+` && `+isBad(row+` td.failure-rate`, "color"))
	b.screenshot("jobs-timeouts")
	b.do("m_hang's page", chromedp.Click(chromedp.CSS(row+` a`)))
	b.until("its health and strip", `document.querySelector("main h2 [data-verdict]")?.dataset.verdict === "timing_out" &&
		document.querySelectorAll("#job-health a.run").length === 3`)
	b.until("its charts from history", `document.querySelector("#job-runs")?.dataset.sum === "3"`)
	// Every run took 5 min: the duration axis still reads as a scale from
	// zero, not "5.0 min" at every tick.
	b.until("a duration axis from zero", `(() => { const t = document.querySelector("#job-cost")?.dataset.yticks?.split("|") || [];
		return t.length > 1 && new Set(t).size === t.length && t[0] === "0 ms"; })()`)
	b.screenshot("job")
}

// checkAlertHistory: an alert's course, from pending to acknowledged,
// with the notification the delivery log recorded.
func checkAlertHistory(b *browser) {
	// On a 400 px screen, the summary and Ack are in reach without
	// scrolling sideways.
	b.do("a 400 px screen", chromedp.EmulateViewport(400, 800))
	b.goTo("/alerts")
	b.until("the firing alert", `!!document.querySelector('#alerts-table tr[data-state="firing"] button.ack')`)
	b.until("the alerts fit", fits+` && `+inView(`#alerts-table td.summary`)+` && `+inView(`#alerts-table button.ack`))
	b.screenshot("alerts-400")
	b.do("a wide screen", chromedp.EmulateViewport(1280, 900))
	b.do("ack", chromedp.Click(chromedp.CSS(`#alerts-table tr[data-state="firing"] button.ack`)))
	b.until("acknowledged", `[...document.querySelectorAll("#alerts-table td.acked")].some(td => td.textContent === "by local")`)
	b.do("its history", chromedp.Click(chromedp.CSS(`#alerts-table tr[data-state="firing"] button.history`)))
	b.until("fired, notified, acknowledged", `(() => { const steps = [...document.querySelectorAll(".history-of li")].map(li => li.dataset.step + ":" + li.textContent);
		return steps.some(s => s.startsWith("firing:")) && steps.some(s => s.startsWith("sent:") && s.includes("to console")) &&
			steps.some(s => s.startsWith("acked:") && s.includes("by local")); })()`)
	b.screenshot("alert-history")
	b.do("by rule", chromedp.Click(chromedp.CSS(`#tab-rules`)))
	b.until("the rule's alerts", `!!document.querySelector('#by-rule section[data-rule="etl_failures"] tr[data-alert]')`)
}

// checkSystemInWords: components with verdicts and figures in units, no
// JSON; the last evaluation has its value.
func checkSystemInWords(b *browser) {
	b.goTo("/system")
	b.until("the components", `!!document.querySelector("#sys-alert") && !!document.querySelector("#sys-notifications") && !!document.querySelector("#sys-metrics")`)
	b.until("the last evaluation's value", `/ago$/.test(`+text("#card-last-eval .n")+`)`)
	b.until("alerts in a sentence", text("#sys-alert p")+`.includes("1 firing")`)
	b.until("no raw JSON", `!/[{}"]/.test(document.querySelector("#system").textContent)`)
	b.until("memory with a unit", `/ (B|KB|MB)$/.test([...document.querySelectorAll("#sys-metrics dd")].map(d => d.textContent).find(t => /B$/.test(t)) || "")`)
	b.screenshot("system-words")
}

// fits: nothing scrolls sideways on a 400 px screen.
const fits = `document.documentElement.scrollWidth <= 400`

// inView: the element is on a 400 px screen, whole.
func inView(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; const r = e.getBoundingClientRect();
		return r.width > 0 && r.left >= 0 && r.right <= 400; })()`, sel)
}

// oneLine: every element sel finds is one line high (a badge that breaks
// inside its word is two).
func oneLine(sel string) string {
	return fmt.Sprintf(`(() => { const all = [...document.querySelectorAll(%q)]; return all.length > 0 &&
		all.every(e => e.getBoundingClientRect().height < 1.5 * parseFloat(getComputedStyle(e).lineHeight)); })()`, sel)
}

// checkNarrow: at 400 px the tables reflow, nothing scrolls sideways and
// the status stays on screen.
func checkNarrow(b *browser, d *dashboard) {
	b.do("a 400 px screen", chromedp.EmulateViewport(400, 800), chromedp.Navigate(d.srv.URL+"/"))
	b.until("the board fits", `document.querySelectorAll("#board tbody tr").length === 3 && `+fits)
	b.until("the verdict in view", inView(`#board tbody tr [data-verdict]`)+` && `+inView(`#board tbody tr .strip`))
	// A run in progress beside the last one leaves the status little room:
	// its badge keeps its word whole ("timeou" over "t" before).
	d.report(fmt.Sprintf(`{"taskID":"hang-now","name":"m_hang","sequence":1,"status":"running","ts":%d}`, time.Now().UnixMilli()))
	b.until("m_hang running", text(`tr[data-job="m_hang"] td[data-label="Last run"]`)+`.includes("1 running")`)
	b.until("each status on one line", oneLine(`#board .st`))
	b.screenshot("board-400")
	b.goTo("/tasks")
	b.until("the tasks fit", `document.querySelectorAll("#tasks-table tbody tr").length > 0 && `+fits)
	b.until("a task's status in view", inView(`#tasks-table tbody tr .st`))
	b.screenshot("tasks-400")
	b.goTo("/jobs")
	b.until("the jobs fit", `document.querySelectorAll("#jobs-table tbody tr").length === 3 && `+fits+` && `+inView(`#jobs-table td.failure-rate`))
	b.screenshot("jobs-400")
}
