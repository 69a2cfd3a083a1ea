// System: Apollo-11's own health.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, Card, fmtNum, NotAvailable, fmtAgo } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { system } from "/lib/stream.js";

export function System() {
  const [polled, setPolled] = useState(null);
  const [state, setState] = useState("loading");
  const [rate, setRate] = useState(null);
  useEffect(() => {
    let stop = false;
    let prev = null;
    const load = () => api("/api/v1/system").then((d) => {
      if (stop) return;
      const now = Date.now();
      if (prev && d.bus) setRate(((d.bus.accepted - prev.accepted) * 1000) / (now - prev.at));
      prev = d.bus ? { accepted: d.bus.accepted, at: now } : null;
      setPolled(d); setState("ok");
    }, (e) => { if (!stop) setState(e instanceof NotFound ? "na" : "error"); });
    load();
    const t = setInterval(load, 5000);
    return () => { stop = true; clearInterval(t); };
  }, []);
  if (state === "na") return html`<h1>System</h1><${NotAvailable} what="System health" />`;
  if (state !== "ok") return html`<h1>System</h1><p class="muted">${state === "error" ? "Could not load the system health." : "Loading…"}</p>`;
  const d = system.value || polled;
  const bus = d.bus || {};
  const stream = d.stream || {};
  const alert = d.alert;
  return html`
    <h1>System</h1>
    <h2>Ingest and queues</h2>
    <div class="cards" id="sys-bus">
      <${Card} label="events/s accepted" value=${rate == null ? "…" : fmtNum(Math.round(rate))} />
      <${Card} label="accepted (total)" value=${fmtNum(bus.accepted)} />
      <${Card} label="changes queued" value=${fmtNum(bus.queued)} />
      <${Card} label="holding area" value=${`${fmtNum(bus.holding)} / ${fmtNum(bus.holdLimit)}`} />
      <${Card} label="refused" value=${fmtNum(bus.refused)} />
      <${Card} label="tasks in memory" value=${fmtNum(bus.tasks)} />
      <${Card} label="duplicates" value=${fmtNum(bus.duplicate)} />
      <${Card} label="illegal" value=${fmtNum(bus.illegal)} />
    </div>
    <h2>Live stream</h2>
    <div class="cards" id="sys-stream">
      <${Card} label="clients" value=${fmtNum(stream.clients)} />
      <${Card} label="messages sent" value=${fmtNum(stream.messages)} />
      <${Card} label="closed as too slow" value=${fmtNum(stream.closedSlow)} />
      <${Card} label="resyncs" value=${fmtNum(stream.resyncs)} />
    </div>
    <h2>Alert engine</h2>
    ${alert ? html`<div class="cards"><${Card} label="last evaluation" value=${fmtAgo(Date.parse(alert.lastEval || alert.lastSeen))} /></div>
      <${Parts} v=${alert} />` : html`<${NotAvailable} what="Alert engine status" />`}
    <h2>Write-ahead log</h2>${d.wal ? html`<${Parts} v=${d.wal} />` : html`<${NotAvailable} what="WAL status" />`}
    <h2>Redis</h2>${d.redis ? html`<${Parts} v=${d.redis} />` : html`<p class="muted">Not in use (embedded mode), or not reported.</p>`}`;
}

// Parts shows a section the server reports that this page has no layout
// for, as name/value pairs.
function Parts({ v }) {
  return html`<div class="panel"><dl class="grid" style="grid-template-columns:repeat(auto-fit,minmax(180px,1fr));margin:0">
    ${Object.entries(v).map(([k, x]) => html`<div><dt class="muted">${k}</dt><dd style="margin:0" class="mono">${typeof x === "object" ? JSON.stringify(x) : String(x)}</dd></div>`)}
  </dl></div>`;
}
