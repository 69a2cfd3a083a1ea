// Alerts: firing, pending and resolved alerts; acknowledge and silence.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, Status, fmtAgo, fmtTime, NotAvailable } from "/lib/ui.js";
import { api, NotFound, toast } from "/lib/api.js";
import { alerts, seedAlerts, ack, principal } from "/lib/stream.js";

const STATES = ["firing", "pending", "resolved"];

export function Alerts() {
  const [tab, setTab] = useState("firing");
  const [listed, setListed] = useState("loading"); // loading | ok | na
  const [silence, setSilence] = useState(null); // the alert being silenced
  const [silences, setSilences] = useState(null); // null: not available
  const [reload, setReload] = useState(0);
  useEffect(() => {
    api("/api/v1/alerts").then((d) => { seedAlerts(d.alerts || []); setListed("ok"); },
      (e) => setListed(e instanceof NotFound ? "na" : "error"));
    api("/api/v1/silences").then((d) => setSilences(d.silences || []), () => setSilences(null));
  }, [reload]);
  const canAct = principal.value && ["operator", "admin"].includes(principal.value.role);
  const list = [...alerts.value.values()].filter((a) => a.state === tab)
    .sort((a, b) => Date.parse(b.firedAt || b.startedAt) - Date.parse(a.firedAt || a.startedAt));
  const doAck = async (a) => {
    let res = ack(a.id);
    if (res) res = await res;
    else {
      try { await api(`/api/v1/alerts/${encodeURIComponent(a.id)}/ack`, { method: "POST" }); res = { ok: true }; }
      catch (e) { res = { ok: false, error: e.message }; }
    }
    toast.value = res.ok ? `Acknowledged ${a.rule} (${a.group}).` : `Could not acknowledge: ${res.error}`;
  };
  return html`
    <h1>Alerts</h1>
    <div class="tabs" role="group" aria-label="Alert state">
      ${STATES.map((s) => html`<button type="button" aria-pressed=${tab === s} onClick=${() => setTab(s)} id=${"tab-" + s}>
        ${s} (${[...alerts.value.values()].filter((a) => a.state === s).length})</button>`)}
    </div>
    ${listed === "na" ? html`<p class="na">Listing past alerts is not available on this server yet; new alerts appear here live.</p>` : ""}
    ${list.length === 0 ? html`<p class="muted">No ${tab} alerts.</p>` : html`
    <div class="table-wrap"><table id="alerts-table"><thead><tr><th>Rule</th><th>Group</th><th>Severity</th><th>Summary</th>
      <th class="hide-narrow">Since</th><th>Acknowledged</th><th><span class="hide-narrow">Actions</span></th></tr></thead>
    <tbody>${list.map((a) => html`<tr data-alert=${a.id}>
      <td>${a.rule}</td><td>${a.group}</td><td><${Status} s=${a.severity} /></td><td>${a.summary}</td>
      <td class="hide-narrow">${fmtAgo(Date.parse(a.firedAt || a.startedAt))}</td>
      <td class="acked">${a.ackedBy ? `by ${a.ackedBy}` : "—"}</td>
      <td class="row">${canAct && !a.ackedBy && a.state !== "resolved" ? html`<button type="button" class="ack" onClick=${() => doAck(a)}>Ack</button>` : ""}
        ${canAct ? html`<button type="button" onClick=${() => setSilence(a)}>Silence</button>` : ""}</td>
    </tr>`)}</tbody></table></div>`}
    ${silence ? html`<${SilenceForm} alert=${silence} onDone=${() => { setSilence(null); setReload(reload + 1); }} />` : ""}
    <h2>Silences</h2>
    ${silences === null ? html`<${NotAvailable} what="Silences" />` : silences.length === 0 ? html`<p class="muted">No silences.</p>` : html`
      <div class="table-wrap"><table id="silences"><thead><tr><th>Rule</th><th>Prefix</th><th>Until</th><th>By</th><th>Comment</th><th></th></tr></thead>
      <tbody>${silences.map((s) => html`<tr><td>${s.rule || "any"}</td><td>${s.prefix || "any"}</td><td>${fmtTime(Date.parse(s.endsAt))}</td>
        <td>${s.author}</td><td>${s.comment}</td><td>${canAct ? html`<button type="button" onClick=${async () => {
          try { await api(`/api/v1/silences/${encodeURIComponent(s.id)}`, { method: "DELETE" }); } catch (e) { toast.value = e.message; }
          setReload(reload + 1);
        }}>Expire</button>` : ""}</td></tr>`)}</tbody></table></div>`}`;
}

function SilenceForm({ alert, onDone }) {
  const [err, setErr] = useState("");
  const submit = async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const start = new Date();
    try {
      await api("/api/v1/silences", { method: "POST", body: {
        rule: alert.rule, prefix: alert.group, labels: alert.labels || {},
        startsAt: start.toISOString(), endsAt: new Date(start.getTime() + Number(f.get("hours")) * 3600_000).toISOString(),
        comment: f.get("comment"),
      } });
      toast.value = `Silenced ${alert.rule} for ${f.get("hours")} h.`;
      onDone();
    } catch (x) { setErr(x instanceof NotFound ? "Silences are not available on this server yet." : x.message); }
  };
  return html`<form class="panel filters" onSubmit=${submit} aria-label="Silence">
    <strong>Silence ${alert.rule} for ${alert.group}</strong>
    <label>For<select name="hours"><option value="1">1 hour</option><option value="4">4 hours</option><option value="24">1 day</option></select></label>
    <label>Comment<input name="comment" required /></label>
    <button class="primary" type="submit">Silence</button><button type="button" onClick=${onDone}>Cancel</button>
    ${err ? html`<span class="errors" role="alert">${err}</span>` : ""}
  </form>`;
}
