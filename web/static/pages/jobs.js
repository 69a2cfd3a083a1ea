// Jobs: one row per job name over a window, and charts for one job.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, fmtPct, fmtMs, fmtNum, NotAvailable } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { Chart } from "/lib/chart.js";
import { metrics } from "/lib/stream.js";

const WINDOWS = ["1m", "5m", "15m", "1h"];

export function Jobs({ name }) {
  const [windowSel, setWindow] = useState("5m");
  const [prefix, setPrefix] = useState("");
  const [data, setData] = useState(null);
  const [state, setState] = useState("loading"); // loading | ok | na | error
  useEffect(() => {
    let stop = false;
    const load = () => api(`/api/v1/metrics?window=${windowSel}&prefix=${encodeURIComponent(prefix)}`).then(
      (d) => { if (!stop) { setData(d); setState("ok"); } },
      (e) => { if (!stop) setState(e instanceof NotFound ? "na" : "error"); });
    load();
    const t = setInterval(load, 10_000);
    return () => { stop = true; clearInterval(t); };
  }, [windowSel, prefix]);
  // The stream's metric messages refresh the table between polls.
  const jobs = (metrics.value?.window === windowSel ? metrics.value.jobs : data?.jobs) || [];
  return html`
    <h1>Jobs</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Job prefix<input data-filter type="search" value=${prefix} onInput=${(e) => setPrefix(e.target.value)} /></label>
      <label>Window<select value=${windowSel} onChange=${(e) => setWindow(e.target.value)}>
        ${WINDOWS.map((w) => html`<option>${w}</option>`)}</select></label>
    </form>
    ${state === "na" ? html`<${NotAvailable} what="Job metrics" />` : state === "error" ? html`<p class="errors">Could not load the metrics.</p>` : html`
    <div class="table-wrap"><table id="jobs-table">
      <thead><tr><th>Job</th><th class="num">Runs</th><th class="num">Failed rate</th><th class="num hide-narrow">Avg cost</th>
        <th class="num hide-narrow">Max cost</th><th class="num">Late rate</th><th class="num">Backlog</th><th class="num hide-narrow">Running</th></tr></thead>
      <tbody>${jobs.map((j) => html`<tr class=${j.name === name ? "sel" : ""}>
        <td><a href=${"/jobs/" + encodeURIComponent(j.name)}>${j.name}</a></td><td class="num">${fmtNum(j.count)}</td>
        <td class="num">${fmtPct(j.failedRate)}</td><td class="num hide-narrow">${fmtMs(j.avgCostMs)}</td>
        <td class="num hide-narrow">${fmtMs(j.maxCostMs)}</td><td class="num">${fmtPct(j.lateRate)}</td>
        <td class="num">${fmtNum(j.backlog)}</td><td class="num hide-narrow">${fmtNum(j.running)}</td></tr>`)}</tbody>
    </table></div>
    ${state === "ok" && jobs.length === 0 ? html`<p class="muted">No runs in this window.</p>` : ""}`}
    ${name ? html`<${JobCharts} name=${name} />` : ""}`;
}

function JobCharts({ name }) {
  const [pts, setPts] = useState(null);
  const [state, setState] = useState("loading");
  useEffect(() => {
    let stop = false;
    const load = () => api(`/api/v1/metrics/${encodeURIComponent(name)}?window=1h&step=10s`).then(
      (d) => { if (!stop) { setPts(d.points || []); setState("ok"); } },
      (e) => { if (!stop) setState(e instanceof NotFound ? "na" : "error"); });
    load();
    const t = setInterval(load, 10_000);
    return () => { stop = true; clearInterval(t); };
  }, [name]);
  if (state === "na") return html`<h2>${name}</h2><${NotAvailable} what="Charts for one job" />`;
  if (state !== "ok") return html`<h2>${name}</h2><p class="muted">${state === "error" ? "Could not load the charts." : "Loading…"}</p>`;
  const xs = pts.map((p) => p.t / 1000);
  return html`<h2>${name} <span class="muted">(last hour)</span></h2>
    <div class="grid" id="job-charts">
      <${Chart} title="Runs per step" data=${[xs, pts.map((p) => p.success ?? null), pts.map((p) => (p.failed ?? 0) + (p.timeout ?? 0))]}
        series=${[{ label: "success", color: "#16a34a" }, { label: "failed/timeout", color: "#dc2626" }]} />
      <${Chart} title="Failed rate" data=${[xs, pts.map((p) => p.failedRate ?? null)]} series=${[{ label: "failed rate" }]} yFormat=${fmtPct} />
      <${Chart} title="Cost" data=${[xs, pts.map((p) => p.avgCostMs ?? null), pts.map((p) => p.maxCostMs ?? null)]}
        series=${[{ label: "avg" }, { label: "max" }]} yFormat=${fmtMs} />
    </div>`;
}
