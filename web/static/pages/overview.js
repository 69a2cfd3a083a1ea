// Overview: live counts by status, finished runs and the failure rate
// over a range of the server's history, and the alerts that are firing.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { useComputed } from "/vendor/signals.mjs";
import { html, Card, fmtPct, fmtNum, fmtAgo, Status, NotAvailable } from "/lib/ui.js";
import { Chart, COLOR, failureSeries } from "/lib/chart.js";
import { useSeries, RangePicker, columns, failureRate } from "/lib/series.js";
import { tasks, alerts, alertsListed, setFilter } from "/lib/stream.js";

const STATUSES = ["pending", "running", "success", "failed", "timeout", "manual_blocked"];
// FIRING is how many firing alerts the overview draws, the newest: a
// rule with BY: name can fire thousands, and the page is drawn again at
// every batch of the stream's tasks. The Alerts page has them all.
const FIRING = 50;
const since = (a) => Date.parse(a.firedAt || a.startedAt);

export function Overview() {
  useEffect(() => setFilter({ types: ["tasks"] }), []);
  const [range, setRange] = useState("1h");
  const counts = useComputed(() => {
    const c = Object.fromEntries(STATUSES.map((s) => [s, 0]));
    for (const t of tasks.value.values()) c[t.status] = (c[t.status] || 0) + 1;
    return c;
  });
  const firing = [...alerts.value.values()].filter((a) => a.state === "firing").sort((a, b) => since(b) - since(a));
  // The server lists at most 10 000 alerts: past that, the firing ones
  // counted here are those it listed.
  const cut = alertsListed.value && alertsListed.value.total > alertsListed.value.listed ? alertsListed.value.total : 0;
  return html`
    <h1>Overview</h1>
    <h2>Runs by status <span class="muted">(the ${fmtNum(tasks.value.size)} most recent)</span></h2>
    <div class="cards" id="counts">
      ${STATUSES.map((s) => html`<${Card} id=${"count-" + s} label=${s.replace("_", " ")} value=${fmtNum(counts.value[s])}
        bad=${(s === "failed" || s === "timeout") && counts.value[s] > 0} />`)}
    </div>
    <${History} range=${range} setRange=${setRange} />
    <h2>Firing alerts</h2>
    ${firing.length === 0 ? html`<p class="muted" id="no-firing">Nothing is firing.</p>` : html`
      <div class="table-wrap"><table id="firing" class="reflow"><thead><tr><th>Rule</th><th>Group</th><th>Severity</th><th>Summary</th><th>Since</th></tr></thead>
      <tbody>${firing.slice(0, FIRING).map((a) => html`<tr><td data-label="Rule">${a.rule}</td><td data-label="Group">${a.group}</td>
        <td data-label="Severity"><${Status} s=${a.severity} /></td>
        <td data-label="Summary">${a.summary}</td><td data-label="Since">${fmtAgo(since(a))}</td></tr>`)}</tbody></table></div>
      ${firing.length > FIRING ? html`<p class="muted more-firing">The newest ${fmtNum(FIRING)} of ${fmtNum(firing.length)} firing alerts${cut
        ? html` listed, of the ${fmtNum(cut)} alerts the server has: <a href="/alerts">see the Alerts page</a>.` : html`: <a href="/alerts">see them all</a>.`}</p>` : ""}`}
    <p><a href="/alerts">All alerts</a> · <a href="/tasks">All tasks</a></p>`;
}

// History charts every job's finished runs and failure rate over the
// range, from the server's metrics.
function History({ range, setRange }) {
  const { state, points } = useSeries("/api/v1/series", range);
  const step = points.length > 1 ? (points[1].t - points[0].t) / 1000 : 0;
  const per = step >= 60 ? `${step / 60} min` : `${step || 10} s`;
  return html`
    <div class="row spread"><h2>Finished runs, every job</h2><${RangePicker} value=${range} onChange=${setRange} id="range" /></div>
    ${state === "na" ? html`<${NotAvailable} what="History of the runs" />` : state === "error" ? html`<p class="errors">Could not load the history.</p>` : html`
    <div class="grid">
      <${Chart} id="chart-throughput" title=${`Finished runs per ${per}, last ${range}`}
        data=${columns(points, (p) => p.success, (p) => p.failed, (p) => p.timeout)}
        series=${[{ label: "success", color: COLOR.success }, ...failureSeries]} />
      <${Chart} id="chart-failrate" title=${`Failure rate (failed and timed out) per ${per}`} data=${columns(points, failureRate)}
        series=${[{ label: "failure rate", color: COLOR.failure, dots: true }]} yFormat=${fmtPct} />
    </div>`}`;
}
