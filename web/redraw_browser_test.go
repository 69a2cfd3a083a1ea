package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// drawnProbe records, through the hook Preact offers its devtools
// (options.diffed), the task ID of every run of a strip (a[data-task]) and
// every row of the tasks (tr[data-task]) that Preact drew again. A row or
// run that skipped its render is not diffed, so it is not recorded.
const drawnProbe = `(async () => {
  const { options } = await import("/vendor/preact.mjs");
  const drawn = window.apolloDrawn = [];
  const prev = options.diffed;
  options.diffed = (v) => {
    if ((v.type === "a" || v.type === "tr") && v.props["data-task"]) drawn.push(v.props["data-task"]);
    prev?.(v);
  };
})()`

// drawnBesides is a JavaScript expression: the task IDs drawn again since
// the probe started, other than id, at most five, joined.
func drawnBesides(id string) string {
	return fmt.Sprintf(`(() => { const o = apolloDrawn.filter((x) => x !== %q); return o.length + " " + o.slice(0, 5).join(","); })()`, id)
}

// Under a storm of about 1 000 task changes a second, redrawing every job
// of the board (500, with 50 runs each) for every batch of the stream kept
// the page's main thread busy nearly all the time: a key typed in the
// filter took seconds to show (BenchmarkDashboardUnderAStorm). A change
// draws again what it changed and nothing else: one new run is one run
// drawn, on the board and in the tasks, and when the board reads the
// verdicts again after the burst, the runs that did not change are not
// drawn again either. Counting renders, not milliseconds, keeps the test
// steady on a loaded machine.
func TestStreamDrawsOnlyWhatChangedInBrowser(t *testing.T) {
	d := newDashboard(t, nil)
	const jobs, runs = 40, 10
	d.seedJobs(jobs, runs)
	b := newBrowser(t)
	b.do("open the board", chromedp.Navigate(d.srv.URL+"/"))
	b.until("the board", fmt.Sprintf(`document.querySelectorAll("#board tbody tr").length === %d &&
		[...document.querySelectorAll("#board .strip")].every((s) => s.children.length === %d)`, jobs, runs))
	b.until("the stream", `document.querySelector("#conn")?.dataset.state === "open"`)
	b.do("count what is drawn", chromedp.Evaluate[chromedp.Void](drawnProbe, chromedp.EvalAwaitPromise))

	// job-003's last run succeeded; its new run fails.
	job, id := stormJob(3), "job-003-live"
	b.until("job-003 not failing", `document.querySelector('tr[data-job="job-003"]')?.dataset.verdict !== "failing"`)
	d.report(run(job, id, "failed", time.Now().Add(-time.Second), 500*time.Millisecond)...)
	b.until("the new run at the end of its strip", fmt.Sprintf(
		`document.querySelector('tr[data-job="job-003"] .strip')?.lastElementChild?.dataset.task === %q`, id))
	b.until("the new run drawn", `apolloDrawn.includes("job-003-live")`)
	if got := b.eval(drawnBesides(id)); got != "0 " {
		t.Errorf("one run joined one strip, and Preact drew %s other runs of the board again", got)
	}
	// The verdicts are read again once the burst is over: job-003 fails.
	b.until("job-003 failing", `document.querySelector('tr[data-job="job-003"]')?.dataset.verdict === "failing"`)
	if got := b.eval(drawnBesides(id)); got != "0 " {
		t.Errorf("the board read again drew %s runs that had not changed", got)
	}

	// The tasks: one new task is one row drawn. The page asks the stream
	// for what the board asked (every task), so no snapshot comes to
	// replace every task: the count starts once the rows are drawn.
	b.goTo("/tasks")
	b.until("the tasks", `document.querySelectorAll("#tasks-table tbody tr").length > 10`)
	b.do("count what is drawn", chromedp.Evaluate[chromedp.Void](drawnProbe, chromedp.EvalAwaitPromise))
	id = "job-005-live"
	d.report(fmt.Sprintf(`{"taskID":%q,"name":"job-005","sequence":1,"status":"running","ts":%d}`, id, time.Now().UnixMilli()))
	b.until("the new task first", fmt.Sprintf(`document.querySelector("#tasks-table tbody tr")?.dataset.task === %q`, id))
	if got := b.eval(drawnBesides(id)); got != "0 " {
		t.Errorf("one task joined the table, and Preact drew %s other rows again", got)
	}
}

// eval evaluates a JavaScript expression that gives a string, or a
// promise of one.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return s
}
