// Jobs: one row per job name over a window, and for one job its health,
// recent runs and charts.
import { useEffect, useRef, useState } from "/vendor/preact-hooks.mjs";
import { html, fmtPct, fmtMs, fmtNum, fmtAgo, fmtIn, Verdict, NotAvailable } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { Chart, COLOR, failureSeries } from "/lib/chart.js";
import { useSeries, RangePicker, columns, failureRate } from "/lib/series.js";
import { metrics, setFilter, onTasks, reconnected } from "/lib/stream.js";
import { Strip } from "/pages/board.js";

const WINDOWS = ["1m", "5m", "15m", "1h"];
// PAGE is how many jobs the table draws at first, and how many more each
// Show more adds. Drawn all at once, 10 000 jobs took the page 6 s to
// open, and each poll, metric message and key typed in the filter as
// long again (headless Chromium on two shared cores,
// TestManyJobsInBrowser's set-up).
const PAGE = 200;

// A cell that counts failures or timeouts is red when it counts any.
const bad = (n) => (n > 0 ? "num bad" : "num");

// onRunsOf calls read a moment after the stream reports a change of the
// job's runs, once for a burst of them (at most twice a second): one job's
// page read its row and its health every 10 s only, and a run that failed
// meanwhile showed as nothing new. The stream's filter is the job's name
// as a prefix, which other jobs' names may start with. It returns the
// function that stops it.
function onRunsOf(name, read) {
  let soon = null;
  const off = onTasks((list) => {
    if (!soon && list.some((t) => t.name === name)) soon = setTimeout(() => { soon = null; read(); }, 500);
  });
  return () => { off(); clearTimeout(soon); };
}

export function Jobs({ name }) {
  const [windowSel, setWindow] = useState("5m");
  const [prefix, setPrefix] = useState("");
  const [data, setData] = useState(null);
  const [state, setState] = useState("loading"); // loading | ok | na | error
  const [shown, setShown] = useState(PAGE);
  const [reads, setReads] = useState(0); // bumping it reads the table again
  const [row, setRow] = useState(null); // {job, window, n}: one job's row, read after the table
  const asked = useRef(0); // the reads of the table and of one job's row, numbered as asked
  useEffect(() => setShown(PAGE), [windowSel, prefix]);
  // The stream's metric message answers for 5 minutes under the filter's
  // prefix: the table takes it for that window. One job's charts take the
  // changes of its runs instead (the filter has one prefix); the table is
  // read every 10 s either way.
  useEffect(() => setFilter(name ? { prefix: name, types: ["tasks"] } : windowSel === "5m" ? { prefix, types: ["metric"] } : {}),
    [name, prefix, windowSel]);
  useEffect(() => {
    let stop = false;
    const load = () => {
      const n = ++asked.current;
      api(`/api/v1/metrics?window=${windowSel}&prefix=${encodeURIComponent(prefix)}`).then(
        (d) => { if (!stop) { setData((was) => (was?.n > n ? was : { ...d, n })); setState("ok"); } },
        (e) => { if (!stop) setState(e instanceof NotFound ? "na" : "error"); });
    };
    load();
    const t = setInterval(load, 10_000);
    return () => { stop = true; clearInterval(t); };
  }, [windowSel, prefix, reads, reconnected.value]); // read at once when the stream comes back
  // On one job's page, its row follows its runs: the job's own row is
  // read (GET /api/v1/metrics under its name, not the whole table) and
  // shown in place of the table's while it is the newer read.
  useEffect(() => {
    setRow(null);
    if (!name || !name.startsWith(prefix)) return;
    let stop = false;
    const off = onRunsOf(name, () => {
      const n = ++asked.current;
      api(`/api/v1/metrics?window=${windowSel}&prefix=${encodeURIComponent(name)}`).then((d) => {
        const job = (d.jobs || []).find((j) => j.name === name);
        if (!stop && job) setRow({ job, window: d.window, n });
      }, () => { /* the next read tries again */ });
    });
    return () => { stop = true; off(); };
  }, [name, prefix, windowSel]);
  const fresh = row && data && row.n > data.n && row.window === data.window ? row.job : null;
  const at = fresh ? (data.jobs || []).findIndex((j) => j.name === fresh.name) : -1;
  // A job not in the table yet (its first run in the window): the table
  // is read again.
  useEffect(() => { if (fresh && at < 0) setReads((n) => n + 1); }, [fresh, at]);
  // The stream's metric messages refresh the table between polls when
  // they answer the same question: the window and prefix as the server
  // spells them in the page's own answer ("5m0s", not "5m").
  const m = metrics.value;
  const live = m && data && m.window === data.window && m.prefix === data.prefix;
  let jobs = (live ? m.jobs : data?.jobs) || [];
  if (!live && at >= 0) {
    jobs = jobs.slice();
    jobs[at] = fresh;
  }
  return html`
    <h1>Jobs</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Job prefix<input data-filter type="search" value=${prefix} onInput=${(e) => setPrefix(e.target.value)} /></label>
      <label>Window<select value=${windowSel} onChange=${(e) => setWindow(e.target.value)}>
        ${WINDOWS.map((w) => html`<option>${w}</option>`)}</select></label>
    </form>
    ${state === "na" ? html`<${NotAvailable} what="Job metrics" />` : state === "error" ? html`<p class="errors">Could not load the metrics.</p>` : html`
    <div class="table-wrap"><table id="jobs-table" class="reflow">
      <thead><tr><th>Job</th><th class="num">Runs</th><th class="num">Failed</th><th class="num">Timed out</th>
        <th class="num">Failure rate</th><th class="num hide-narrow">Avg cost</th><th class="num hide-narrow">Max cost</th>
        <th class="num">Late rate</th><th class="num">Backlog</th><th class="num hide-narrow">Running</th></tr></thead>
      <tbody>${jobs.slice(0, shown).map((j) => html`<tr class=${j.name === name ? "sel" : ""} data-job=${j.name}>
        <td data-label="Job"><a href=${"/jobs/" + encodeURIComponent(j.name)}>${j.name}</a></td>
        <td data-label="Runs" class="num">${fmtNum(j.count)}</td>
        <td data-label="Failed" class=${bad(j.failed)}>${fmtNum(j.failed)}</td>
        <td data-label="Timed out" class=${bad(j.timeout) + " timeouts"}>${fmtNum(j.timeout)}</td>
        <td data-label="Failure rate" class=${bad(j.failed + j.timeout) + " failure-rate"}>${fmtPct(j.count ? (j.failed + j.timeout) / j.count : 0)}</td>
        <td data-label="Avg cost" class="num hide-narrow">${j.count ? fmtMs(j.avgCostMs) : "—"}</td>
        <td data-label="Max cost" class="num hide-narrow">${j.count ? fmtMs(j.maxCostMs) : "—"}</td><td data-label="Late rate" class="num">${fmtPct(j.lateRate)}</td>
        <td data-label="Backlog" class="num">${fmtNum(j.backlog)}</td><td data-label="Running" class="num hide-narrow">${fmtNum(j.running)}</td></tr>`)}</tbody>
    </table></div>
    ${jobs.length > shown ? html`<p class="muted more-jobs">The first ${fmtNum(shown)} of ${fmtNum(jobs.length)} jobs.
      <button type="button" onClick=${() => setShown(shown + PAGE)}>Show ${fmtNum(Math.min(PAGE, jobs.length - shown))} more</button></p>` : ""}
    <p class="muted">The failure rate counts failed and timed-out runs over the finished ones.</p>
    ${state === "ok" && jobs.length === 0 ? html`<p class="muted">No runs in this window.</p>` : ""}`}
    ${name ? html`<${JobHealth} name=${name} /><${JobCharts} name=${name} />` : ""}`;
}

// JobHealth is the job's row of the health board, with its whole strip.
function JobHealth({ name }) {
  const [job, setJob] = useState(null);
  useEffect(() => {
    let stop = false;
    let asked = 0;
    let shown = 0; // the newest read shown: an answer overtaken by a newer one is dropped
    const load = () => {
      const n = ++asked;
      api(`/api/v1/jobs/health?job=${encodeURIComponent(name)}`).then(
        (d) => { if (!stop && n > shown) { shown = n; setJob({ ...d.jobs[0], now: d.now }); } },
        () => { if (!stop && n > shown) { shown = n; setJob(null); } });
    };
    load();
    const t = setInterval(load, 10_000);
    const off = onRunsOf(name, load);
    return () => { stop = true; clearInterval(t); off(); };
  }, [name, reconnected.value]);
  if (!job) return html`<h2>${name}</h2>`;
  const last = job.lastRun;
  return html`<h2>${name} <${Verdict} v=${job.verdict} /></h2>
    <div class="panel" id="job-health">
      <p>${last ? html`Last run ${last.status.replace("_", " ")} ${fmtAgo(last.finishedAt, job.now)}${last.costMs ? ` after ${fmtMs(last.costMs)}` : ""}.` : "No run has finished."}
        ${job.usualCostMs ? ` It usually takes ${fmtMs(job.usualCostMs)}.` : ""}
        ${job.usualEveryMs ? ` It runs about every ${fmtMs(job.usualEveryMs)}.` : ""}
        ${job.nextRunAt ? ` Next run ${fmtIn(job.nextRunAt, job.now)}.` : ""}
        ${job.running ? ` ${fmtNum(job.running)} running now.` : ""}</p>
      <${Strip} runs=${job.runs} />
    </div>`;
}

function JobCharts({ name }) {
  const [range, setRange] = useState("1h");
  const { state, points } = useSeries(`/api/v1/metrics/${encodeURIComponent(name)}`, range);
  return html`<div class="row spread"><h2>History <span class="muted">(last ${range})</span></h2>
      <${RangePicker} value=${range} onChange=${setRange} id="job-range" /></div>
    ${state === "na" ? html`<${NotAvailable} what="Charts for one job" />` : state !== "ok" ? html`<p class="muted">${state === "error" ? "Could not load the charts." : "Loading…"}</p>` : html`
    <div class="grid" id="job-charts">
      <${Chart} id="job-runs" title="Finished runs per step" data=${columns(points, (p) => p.success, (p) => p.failed, (p) => p.timeout)}
        series=${[{ label: "success", color: COLOR.success }, ...failureSeries]} />
      <${Chart} id="job-failrate" title="Failure rate (failed and timed out)" data=${columns(points, failureRate)}
        series=${[{ label: "failure rate", color: COLOR.failure, dots: true }]} yFormat=${fmtPct} />
      <${Chart} id="job-cost" title="Duration" data=${columns(points, (p) => (p.count ? p.avgCostMs : null), (p) => (p.count ? p.maxCostMs : null))}
        series=${[{ label: "average", color: COLOR.info, dots: true }, { label: "longest", color: COLOR.other, dots: true }]} yFormat=${fmtMs} />
    </div>`}`;
}
