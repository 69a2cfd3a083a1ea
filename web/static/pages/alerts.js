// Alerts: firing, pending and resolved alerts, acknowledge and silence;
// each alert's history, and every rule's alerts.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, Status, fmtAgo, fmtTime, fmtMs, fmtNum, NotAvailable } from "/lib/ui.js";
import { api, NotFound, toast } from "/lib/api.js";
import { alerts, alertsListed, readAlerts, ack, principal, reconnected, setFilter } from "/lib/stream.js";

const TABS = [["firing", "firing"], ["pending", "pending"], ["resolved", "resolved"], ["rules", "by rule"]];
// PAGE is how many alerts a tab shows at first, and how many more each
// "Show more" adds. A rule with BY: name over thousands of failing jobs
// fires an alert per job: drawn all at once, 5 000 alerts took the page
// 15 s to open and each click (History, Ack) 6 s to answer (headless
// Chromium on two shared cores, TestManyAlertsInBrowser's set-up).
const PAGE = 200;

const since = (a) => Date.parse(a.firedAt || a.startedAt);
// named is "rule (group)", or the rule alone when the alert has no group.
const named = (a) => (a.group ? `${a.rule} (${a.group})` : a.rule);

export function Alerts() {
  const [tab, setTab] = useState("firing");
  const [listed, setListed] = useState("loading"); // loading | ok | na
  const [silence, setSilence] = useState(null); // the alert being silenced
  const [open, setOpen] = useState(""); // the alert whose history shows
  const [silences, setSilences] = useState(undefined); // undefined: loading; null: not available; false: could not load
  const [reload, setReload] = useState(0);
  const [shown, setShown] = useState(PAGE); // alerts drawn in the tab
  const pick = (s) => { setTab(s); setShown(PAGE); };
  useEffect(() => setFilter({}), []); // the alerts, which always come
  useEffect(() => {
    readAlerts().then(() => setListed("ok"),
      (e) => setListed(e instanceof NotFound ? "na" : "error"));
    api("/api/v1/silences").then((d) => setSilences(d.silences || []), (e) => setSilences(e instanceof NotFound ? null : false));
  }, [reload, reconnected.value]);
  const canAct = principal.value && ["operator", "admin"].includes(principal.value.role);
  const all = [...alerts.value.values()];
  const count = (s) => all.filter((a) => a.state === s).length;
  const doAck = async (a) => {
    let res = ack(a.id);
    if (res) res = await res;
    else {
      try { await api(`/api/v1/alerts/${encodeURIComponent(a.id)}/ack`, { method: "POST" }); res = { ok: true }; }
      catch (e) { res = { ok: false, error: e.message }; }
    }
    // Unanswered because the stream closed, the ack may have been made:
    // the page says which once the alerts are read again.
    toast.value = res.ok ? `Acknowledged ${named(a)}.` : res.unknown
      ? `The connection closed before the server answered: ${named(a)} may have been acknowledged. The page says whether it was once it is connected again.`
      : `Could not acknowledge: ${res.error}`;
  };
  const more = () => setShown(shown + PAGE);
  const rows = { canAct, doAck, setSilence, open, setOpen, silences: silences || [], shown, more };
  return html`
    <h1>Alerts</h1>
    <div class="tabs" role="group" aria-label="Alert state">
      ${TABS.map(([s, label]) => html`<button type="button" aria-pressed=${tab === s} onClick=${() => pick(s)} id=${"tab-" + s}>
        ${label}${s === "rules" ? "" : ` (${count(s)})`}</button>`)}
    </div>
    <${Cut} l=${alertsListed.value} />
    ${listed === "na" ? html`<p class="na">Listing past alerts is not available on this server yet; new alerts appear here live.</p>` : ""}
    ${tab === "rules" ? html`<${ByRule} all=${all} rows=${rows} />` : html`<${AlertTable} list=${all.filter((a) => a.state === tab)
      .sort((a, b) => since(b) - since(a))} rows=${rows} empty=${`No ${tab} alerts.`} />`}
    ${silence ? html`<${SilenceForm} alert=${silence} onDone=${() => { setSilence(null); setReload(reload + 1); }} />` : ""}
    <h2>Silences</h2>
    ${silences === undefined ? html`<p class="muted">Loading…</p>` : silences === null ? html`<${NotAvailable} what="Silences" />` : silences === false ? html`<p class="errors">Could not load the silences.</p>`
      : silences.length === 0 ? html`<p class="muted">No silences.</p>` : html`
      <div class="table-wrap"><table id="silences" class="reflow"><thead><tr><th>Rule</th><th>Group</th><th>Prefix</th><th>Labels</th><th>Until</th><th>By</th><th>Comment</th><th></th></tr></thead>
      <tbody>${silences.map((s) => html`<tr><td data-label="Rule">${s.rule || "any"}</td><td data-label="Group">${s.group || "any"}</td>
        <td data-label="Prefix">${s.prefix || "any"}</td><td data-label="Labels">${labelsOf(s.labels) || "any"}</td>
        <td data-label="Until">${fmtTime(Date.parse(s.endsAt))}</td>
        <td data-label="By">${s.createdBy}</td><td data-label="Comment">${s.comment}</td><td>${canAct ? html`<button type="button" onClick=${async () => {
          try { await api(`/api/v1/silences/${encodeURIComponent(s.id)}`, { method: "DELETE" }); } catch (e) { toast.value = e.message; }
          setReload(reload + 1);
        }}>Expire</button>` : ""}</td></tr>`)}</tbody></table></div>`}`;
}

// labelsOf is a silence's labels as "k=v, k=v", in the order of their
// keys: a silence matches only alerts that have all of them.
const labelsOf = (m) => Object.keys(m || {}).sort().map((k) => `${k}=${m[k]}`).join(", ");

// Cut says that the server has more alerts than it listed: the counts
// and tabs are of those it listed, firing first.
function Cut({ l }) {
  if (!l || l.total <= l.listed) return "";
  return html`<p class="errors" id="alerts-cut">The server has ${fmtNum(l.total)} alerts and lists ${fmtNum(l.listed)}, firing first, then
    pending, newest first: the counts below are of those. <code>apollo alerts --state firing</code> (or <code>pending</code>, <code>resolved</code>) lists one state at a time.</p>`;
}

// More says how many of the alerts are drawn, and offers the next ones.
function More({ shown, total, more }) {
  if (total <= shown) return "";
  return html`<p class="muted more-alerts">The newest ${fmtNum(shown)} of ${fmtNum(total)} alerts.
    <button type="button" onClick=${more}>Show ${fmtNum(Math.min(PAGE, total - shown))} more</button></p>`;
}

function AlertTable({ list, rows, empty }) {
  const { canAct, doAck, setSilence, open, setOpen } = rows;
  if (list.length === 0) return html`<p class="muted">${empty}</p>`;
  const drawn = list.slice(0, rows.shown);
  return html`<div class="table-wrap"><table id="alerts-table" class="reflow"><thead><tr><th>Rule</th><th>Group</th><th>Severity</th><th>Summary</th>
      <th>Since</th><th>Acknowledged</th><th>Actions</th></tr></thead>
    <tbody>${drawn.map((a) => html`<tr data-alert=${a.id} data-state=${a.state}>
      <td data-label="Rule">${a.rule}</td><td data-label="Group">${a.group}</td><td data-label="Severity"><${Status} s=${a.severity} /></td>
      <td data-label="Summary" class="summary">${a.summary}</td>
      <td data-label="Since">${fmtAgo(since(a))}</td>
      <td data-label="Acknowledged" class="acked">${a.ackedBy ? `by ${a.ackedBy}` : "—"}</td>
      <td data-label="Actions" class="row actions">${canAct && !a.ackedBy && a.state !== "resolved" ? html`<button type="button" class="ack" onClick=${() => doAck(a)}>Ack</button>` : ""}
        ${canAct && a.state !== "resolved" ? html`<button type="button" onClick=${() => setSilence(a)}>Silence</button>` : ""}
        <button type="button" class="history" aria-expanded=${open === a.id} onClick=${() => setOpen(open === a.id ? "" : a.id)}>History</button></td>
    </tr>
    ${open === a.id ? html`<tr class="detail"><td colspan="7"><${AlertHistory} alert=${a} silences=${rows.silences} /></td></tr>` : ""}`)}</tbody></table></div>
    <${More} shown=${rows.shown} total=${list.length} more=${rows.more} />`;
}

// ByRule lists every rule that has alerts, with each alert's course in
// one line, newest first.
function ByRule({ all, rows }) {
  const rules = new Map();
  for (const a of all) rules.set(a.rule, [...(rules.get(a.rule) || []), a]);
  if (rules.size === 0) return html`<p class="muted">No rule has an alert that this server remembers.</p>`;
  // Rules by name until about rows.shown alerts are drawn, each with its
  // newest rows.shown.
  const names = [...rules.keys()].sort();
  let drawn = 0;
  const some = names.filter((r) => { const take = drawn < rows.shown; drawn += rules.get(r).length; return take; });
  return html`<div id="by-rule">${some.map((r) => {
    const list = rules.get(r).sort((a, b) => Date.parse(b.startedAt) - Date.parse(a.startedAt));
    return html`<section class="panel" data-rule=${r}><h3>${r} <span class="muted">· ${list.length} alert${list.length === 1 ? "" : "s"}</span></h3>
      <${AlertTable} list=${list} rows=${rows} empty="" /></section>`;
  })}
    ${some.length < names.length ? html`<p class="muted more-alerts">${fmtNum(some.length)} of ${fmtNum(names.length)} rules.
      <button type="button" onClick=${rows.more}>Show more</button></p>` : ""}</div>`;
}

// AlertHistory is one alert's course: when it went pending, firing,
// acknowledged, silenced and resolved, and every notification attempt of
// the delivery log (GET /api/v1/notifications), in time order.
export function AlertHistory({ alert, silences }) {
  const [attempts, setAttempts] = useState(null); // null: loading; false: not available; "error": could not load
  useEffect(() => {
    api(`/api/v1/notifications?alert=${encodeURIComponent(alert.id)}&limit=100`).then((d) => setAttempts(d.attempts || []),
      (e) => setAttempts(e instanceof NotFound ? false : "error"));
  }, [alert.id, alert.state, alert.ackedBy, reconnected.value]);
  const at = (t) => (t ? Date.parse(t) : 0);
  const sil = silences.find((s) => s.id === alert.silenceID);
  const steps = [
    // An event rule fires at its first match: it has no pending time.
    [alert.startedAt === alert.firedAt ? 0 : at(alert.startedAt), "pending: the condition holds, waiting for its duration", "pending"],
    [at(alert.firedAt), "firing", "firing"],
    [at(alert.ackedAt), `acknowledged by ${alert.ackedBy}`, "acked"],
    [at(alert.silencedAt), `silenced${sil ? ` (${sil.comment}, by ${sil.createdBy}, until ${fmtTime(Date.parse(sil.endsAt))})` : alert.silenceID ? ` by silence ${alert.silenceID}` : ""}: notifications held back`, "silenced"],
    [at(alert.resolvedAt), "resolved", "resolved"],
  ].filter(([t]) => t > 0);
  for (const x of Array.isArray(attempts) ? attempts : []) {
    const where = `${x.kind} notification to ${x.channel}`;
    const what = x.outcome === "sent" ? `sent ${where}` : `${x.outcome.replace("_", " ")}: ${where}${x.error ? ` (${x.error})` : ""}`;
    const took = x.latency >= 1e6 ? ` in ${fmtMs(x.latency / 1e6)}` : ""; // ns
    steps.push([at(x.at), `${what}${x.try > 1 ? `, try ${x.try}` : ""}${took}`, x.outcome === "sent" ? "sent" : "failed"]);
  }
  steps.sort((a, b) => a[0] - b[0]);
  return html`<div class="history-of" aria-label=${`History of ${named(alert)}`}>
    <ol class="timeline">${steps.map(([t, text, kind]) => html`<li data-step=${kind}><span class="muted">${fmtTime(t)}</span> ${text}</li>`)}</ol>
    ${attempts === false ? html`<p class="na">The delivery log is not available on this server.</p>`
      : attempts === "error" ? html`<p class="errors">Could not load the delivery log.</p>`
      : attempts?.length === 0 ? html`<p class="muted">No notification was sent for it${alert.channels?.length ? "" : " (its rule names no channel)"}.</p>` : ""}
  </div>`;
}

function SilenceForm({ alert, onDone }) {
  const [err, setErr] = useState("");
  const submit = async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      // From now for so long by the server's clock: the browser's may be
      // wrong, and a silence made from it would start hours later, or be
      // over already.
      await api("/api/v1/silences", { method: "POST", body: {
        rule: alert.rule, group: alert.group, labels: alert.labels || {},
        duration: `${Number(f.get("hours"))}h`, comment: f.get("comment"),
      } });
      toast.value = `Silenced ${alert.rule} for ${f.get("hours")} h.`;
      onDone();
    } catch (x) { setErr(x instanceof NotFound ? "Silences are not available on this server yet." : x.message); }
  };
  return html`<form class="panel filters" onSubmit=${submit} aria-label="Silence">
    <strong>Silence ${alert.rule}${alert.group ? ` for ${alert.group}` : ""}</strong>
    <label>For<select name="hours"><option value="1">1 hour</option><option value="4">4 hours</option><option value="24">1 day</option></select></label>
    <label>Comment<input name="comment" required /></label>
    <button class="primary" type="submit">Silence</button><button type="button" onClick=${onDone}>Cancel</button>
    ${err ? html`<span class="errors" role="alert">${err}</span>` : ""}
  </form>`;
}
