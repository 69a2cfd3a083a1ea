// Overview: live counts by status, throughput and failure rate over the
// last hour, and the alerts that are firing.
import { useEffect } from "/vendor/preact-hooks.mjs";
import { useComputed } from "/vendor/signals.mjs";
import { html, Card, fmtPct, fmtNum, fmtAgo, Status } from "/lib/ui.js";
import { Chart } from "/lib/chart.js";
import { tasks, finishes, alerts, metrics, setFilter } from "/lib/stream.js";

const STATUSES = ["pending", "running", "success", "failed", "timeout", "manual_blocked"];

export function Overview() {
  useEffect(() => setFilter({}), []);
  const counts = useComputed(() => {
    const c = Object.fromEntries(STATUSES.map((s) => [s, 0]));
    for (const t of tasks.value.values()) c[t.status] = (c[t.status] || 0) + 1;
    return c;
  });
  const series = useComputed(() => {
    const now = Math.floor(Date.now() / 10_000) * 10_000;
    const xs = [], ok = [], bad = [], rate = [];
    for (let b = now - 3600_000 + 10_000; b <= now; b += 10_000) {
      const x = finishes.value.get(b) || { ok: 0, bad: 0 };
      xs.push(b / 1000); ok.push(x.ok); bad.push(x.bad);
      rate.push(x.ok + x.bad ? x.bad / (x.ok + x.bad) : null);
    }
    return { thr: [xs, ok, bad], rate: [xs, rate] };
  });
  const firing = [...alerts.value.values()].filter((a) => a.state === "firing");
  const jobs = metrics.value?.jobs;
  return html`
    <h1>Overview</h1>
    <h2>Runs by status <span class="muted">(the ${fmtNum(tasks.value.size)} most recent)</span></h2>
    <div class="cards" id="counts">
      ${STATUSES.map((s) => html`<${Card} id=${"count-" + s} label=${s.replace("_", " ")} value=${fmtNum(counts.value[s])} />`)}
    </div>
    ${jobs ? html`<div class="cards" id="window-counts">
      <${Card} label=${`runs, last ${metrics.value.window || "window"}`} value=${fmtNum(jobs.reduce((n, j) => n + (j.count || 0), 0))} />
      <${Card} label="failed" value=${fmtNum(jobs.reduce((n, j) => n + (j.failed || 0), 0))} />
      <${Card} label="running now" value=${fmtNum(jobs.reduce((n, j) => n + (j.running || 0), 0))} />
      <${Card} label="backlog" value=${fmtNum(jobs.reduce((n, j) => n + (j.backlog || 0), 0))} />
    </div>` : ""}
    <div class="grid">
      <${Chart} id="chart-throughput" title="Finished runs per 10 s (last hour, seen by this page)"
        data=${series.value.thr} series=${[{ label: "success", color: "#16a34a" }, { label: "failed/timeout", color: "#dc2626" }]} />
      <${Chart} id="chart-failrate" title="Failure rate per 10 s" data=${series.value.rate}
        series=${[{ label: "failure rate", color: "#dc2626" }]} yFormat=${fmtPct} />
    </div>
    <h2>Firing alerts</h2>
    ${firing.length === 0 ? html`<p class="muted" id="no-firing">Nothing is firing.</p>` : html`
      <div class="table-wrap"><table id="firing"><thead><tr><th>Rule</th><th>Group</th><th>Severity</th><th>Summary</th><th>Since</th></tr></thead>
      <tbody>${firing.map((a) => html`<tr><td>${a.rule}</td><td>${a.group}</td><td><${Status} s=${a.severity} /></td>
        <td>${a.summary}</td><td>${fmtAgo(Date.parse(a.firedAt || a.startedAt))}</td></tr>`)}</tbody></table></div>`}
    <p><a href="/alerts">All alerts</a> · <a href="/tasks">All tasks</a></p>`;
}
