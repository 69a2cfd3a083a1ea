// Tasks: the live table with filters, and one task with its timeline.
import { Component } from "/vendor/preact.mjs";
import { useEffect, useRef, useState } from "/vendor/preact-hooks.mjs";
import { html, Status, fmtTime, fmtMs, fmtNum, today } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { serverNow } from "/lib/clock.js";
import { tasks, setFilter, principal, reconnected, listingError } from "/lib/stream.js";

const STATUSES = ["pending", "running", "success", "failed", "timeout", "manual_blocked"];
// PAGE is how many rows are drawn at first, and how many more each Show
// more adds: the stream's snapshot holds the newest 500 that match.
const PAGE = 500;
const SINCE = [["", "any time"], ["900000", "last 15 min"], ["3600000", "last hour"], ["86400000", "last 24 h"]];

// created orders tasks as GET /api/v1/tasks and the stream's snapshot
// list them: first reported newest first, then by task ID, descending. A
// run keeps its place whatever happens to it later, so the pages read
// with Show more follow the rows shown, each run once.
function created(a, b) {
  return (b.createdAt || b.updatedAt) - (a.createdAt || a.updatedAt) || (a.taskID < b.taskID ? 1 : a.taskID > b.taskID ? -1 : 0);
}

// newest is the newer of two states of one task (a stream update or a page
// read earlier), as the stream compares them.
function newest(a, b) {
  if (!a || !b) return a || b;
  return b.sequence > a.sequence || (b.sequence === a.sequence && b.updatedAt >= a.updatedAt) ? b : a;
}

const noOlder = { who: "", tasks: new Map(), next: "", end: false, loading: false, err: "" };

export function Tasks() {
  const q = new URLSearchParams(location.search);
  const [prefix, setPrefix] = useState(q.get("prefix") || "");
  const [status, setStatus] = useState(q.get("status") || "");
  const [since, setSince] = useState(q.get("since") || "");
  // The stream holds the newest tasks (its snapshot, at most PAGE, and
  // what changed since); older ones are read from GET /api/v1/tasks, page
  // by page, when the user asks for them: older.tasks, the cursor of the
  // next page, and whether the last page came.
  const [shown, setShown] = useState(PAGE);
  const [read, setOlder] = useState(noOlder);
  const reading = useRef(0); // a read of pages counts only for the filter and stream it was made for
  const who = principal.value ? `${principal.value.tenant}\n${principal.value.name}` : "";
  // Read for another principal (signed in again), the rows read are not
  // drawn, not even once before the effect below drops them.
  const older = read.who === who ? read : { ...noOlder, who };
  useEffect(() => {
    reading.current++;
    setShown(PAGE);
    setOlder({ ...noOlder, who });
  }, [prefix, status, since, who, reconnected.value]);
  useEffect(() => {
    // The stream filters by prefix and status on the server; time is
    // applied here.
    const t = setTimeout(() => setFilter({ prefix, status: status ? [status] : [], types: ["tasks"] }), 250);
    const p = new URLSearchParams();
    if (prefix) p.set("prefix", prefix);
    if (status) p.set("status", status);
    if (since) p.set("since", since);
    history.replaceState(null, "", "/tasks" + (p.size ? "?" + p : ""));
    return () => clearTimeout(t);
  }, [prefix, status, since]);
  const from = since ? serverNow() - Number(since) : 0;
  const matches = (t) => (!prefix || t.name.startsWith(prefix) || t.taskID.startsWith(prefix)) && (!status || t.status === status);
  // A task read on a page and changed on the stream since is shown as it
  // is now: out of the filter, it leaves.
  const all = new Map(tasks.value);
  let live = 0; // the stream's tasks that match, before the time filter
  for (const t of tasks.value.values()) if (matches(t)) live++;
  for (const t of older.tasks.values()) all.set(t.taskID, newest(all.get(t.taskID), t));
  const found = [...all.values()].filter((t) => matches(t) && t.updatedAt >= from).sort(created);
  const rows = found.slice(0, shown);
  // More may exist unless every match is drawn and either the pages read
  // came to the end or the stream's snapshot was not full.
  const more = found.length > rows.length || (!older.end && (live >= PAGE || older.tasks.size > 0));
  const showMore = async () => {
    const want = shown + PAGE;
    setShown(want);
    if (found.length >= want || older.end) return;
    const mine = reading.current;
    let { next } = older;
    const got = new Map(older.tasks);
    setOlder({ ...older, loading: true, err: "" });
    try {
      let end = false;
      // Pages from the first one: the first overlaps the stream's; read
      // until the rows drawn are filled, or the last page came.
      while (!end) {
        const p = new URLSearchParams({ limit: String(PAGE) });
        if (prefix) p.set("prefix", prefix);
        if (status) p.set("status", status);
        if (since) p.set("since", String(from));
        if (next) p.set("cursor", next);
        const d = await api("/api/v1/tasks?" + p);
        if (mine !== reading.current) return;
        for (const t of d.tasks || []) got.set(t.taskID, t);
        next = d.next || "";
        end = !next;
        let n = 0;
        for (const [id, t] of all) if (!got.has(id) && matches(t) && t.updatedAt >= from) n++;
        for (const [id, t] of got) { const u = newest(all.get(id), t); if (matches(u) && u.updatedAt >= from) n++; }
        if (n >= want) break;
      }
      setOlder({ who: older.who, tasks: got, next, end, loading: false, err: "" });
    } catch (e) {
      if (mine === reading.current) setOlder({ who: older.who, tasks: got, next, end: false, loading: false, err: e.message });
    }
  };
  const day = today();
  return html`
    <h1>Tasks</h1>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label>Job or task prefix<input id="f-prefix" data-filter type="search" value=${prefix}
        onInput=${(e) => setPrefix(e.target.value)} placeholder="e.g. batch_" /></label>
      <label>Status<select id="f-status" value=${status} onChange=${(e) => setStatus(e.target.value)}>
        <option value="">any</option>${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>Updated<select id="f-since" value=${since} onChange=${(e) => setSince(e.target.value)}>
        ${SINCE.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></label>
      <span class="muted" id="task-count">${fmtNum(rows.length)} shown${more ? ", newest first" : ""}</span>
    </form>
    <div class="table-wrap"><table id="tasks-table" class="reflow">
      <thead><tr><th>Task</th><th>Job</th><th>Status</th><th class="hide-narrow">Started</th><th class="hide-narrow num">Cost</th><th>Updated</th></tr></thead>
      <tbody>${rows.map((t) => html`<${TaskRow} key=${t.taskID} t=${t} day=${day} />`)}</tbody>
    </table></div>
    ${listingError.value ? html`<p class="errors" id="listing-failed" role="alert">The server could not list the tasks (${listingError.value}):
      tasks that match may be missing here; those that change from now on show.</p>`
      : rows.length === 0 && !more ? html`<p class="muted">No task matches.</p>` : ""}
    ${more || older.err ? html`<p class="muted more-tasks">${more ? `The newest ${fmtNum(rows.length)} shown; there are more. ` : ""}
      ${older.err ? html`<span role="alert">Could not read more: ${older.err}. </span>` : ""}
      <button type="button" disabled=${older.loading} onClick=${showMore}>${older.loading ? "Reading…" : older.err ? "Try again" : "Show more"}</button></p>` : ""}`;
}

// TaskRow is one task's row, drawn again only when the stream changed the
// task (or the day did: fmtTime adds the date to another day's times).
// Under a storm most of the 500 rows shown stay as they were from one
// batch to the next (BenchmarkDashboardUnderAStorm).
class TaskRow extends Component {
  shouldComponentUpdate(next) {
    return next.t !== this.props.t || next.day !== this.props.day;
  }

  render({ t }) {
    return html`<tr data-task=${t.taskID}>
      <td data-label="Task"><a href=${"/tasks/" + encodeURIComponent(t.taskID)}>${t.taskID}</a>${t.late ? html` <span class="st st-warning">late</span>` : ""}</td>
      <td data-label="Job">${t.name}</td><td data-label="Status"><${Status} s=${t.status} /></td>
      <td data-label="Started" class="hide-narrow">${fmtTime(t.startedAt)}</td><td data-label="Cost" class="hide-narrow num">${t.costMs ? fmtMs(t.costMs) : "—"}</td>
      <td data-label="Updated">${fmtTime(t.updatedAt)}</td></tr>`;
  }
}

export function TaskDetail({ id }) {
  const [task, setTask] = useState(null);
  const [err, setErr] = useState("");
  const live = tasks.value.get(id);
  const liveKey = live ? `${live.sequence}/${live.updatedAt}` : "";
  useEffect(() => setFilter({ prefix: id, types: ["tasks"] }), [id]); // the changes of this task alone
  useEffect(() => {
    let stop = false;
    api(`/api/v1/tasks/${encodeURIComponent(id)}`).then((t) => { if (!stop) { setTask(t); setErr(""); } },
      (e) => { if (!stop) setErr(e instanceof NotFound ? e.message : e.message); });
    return () => { stop = true; };
  }, [id, liveKey, reconnected.value]);
  const canCorrect = principal.value && ["operator", "admin"].includes(principal.value.role);
  if (err) return html`<h1>Task ${id}</h1><p class="errors" role="alert">${err}</p><p><a href="/tasks">All tasks</a></p>`;
  if (!task) return html`<h1>Task ${id}</h1><p class="muted">Loading…</p>`;
  return html`
    <h1>Task <span class="mono">${task.taskID}</span> <${Status} s=${task.status} /></h1>
    <div class="panel" id="task-detail"><dl class="grid" style="grid-template-columns:repeat(auto-fit,minmax(160px,1fr));margin:0">
      ${[["Job", html`<a href=${"/jobs/" + encodeURIComponent(task.name)}>${task.name}</a>`], ["Sequence", task.sequence],
        ["Scheduled", fmtTime(task.scheduledAt)], ["Started", task.startedAt || !["success", "failed", "timeout"].includes(task.status) ? fmtTime(task.startedAt) : "unknown"], ["Finished", fmtTime(task.finishedAt)],
        ["Cost", task.costMs ? fmtMs(task.costMs) : "—"], ["Timeout", task.timeoutMs ? fmtMs(task.timeoutMs) : "—"],
        ["Late", task.late ? "yes" : "no"]].map(([k, v]) => html`<div><dt class="muted">${k}</dt><dd style="margin:0">${v}</dd></div>`)}
    </dl></div>
    <h2>Timeline</h2>
    <ol class="timeline" id="timeline">${(task.history || []).map((r) => html`<li>
      <${Status} s=${r.status} /> <span class="muted">${r.kind !== "report" ? r.kind.replace("_", " ") + " · " : ""}seq ${r.sequence}</span>
      <div>${fmtTime(r.ts)} <span class="muted">(received ${fmtTime(r.receivedAt)})</span></div>
      ${r.actor ? html`<div>by ${r.actor}: ${r.reason}</div>` : r.reason ? html`<div>${r.reason}</div>` : ""}
      ${r.costMs ? html`<div class="muted">cost ${fmtMs(r.costMs)}</div>` : ""}
      ${r.extra ? html`<pre>${JSON.stringify(r.extra, null, 2)}</pre>` : ""}
    </li>`)}</ol>
    ${canCorrect ? html`<${Correct} task=${task} onDone=${setTask} />` : ""}
    <p><a href="/tasks">All tasks</a></p>`;
}

function Correct({ task, onDone }) {
  const [msg, setMsg] = useState("");
  const submit = async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      onDone(await api(`/api/v1/tasks/${encodeURIComponent(task.taskID)}/status`, { method: "POST", body: { status: f.get("status"), reason: f.get("reason") } }));
      setMsg("Corrected.");
    } catch (err) { setMsg(err.message); }
  };
  return html`<details class="panel"><summary>Correct the status (audited)</summary>
    <form class="filters" onSubmit=${submit} style="margin-top:.6rem">
      <label>New status<select name="status">${STATUSES.map((s) => html`<option>${s}</option>`)}</select></label>
      <label>Reason<input name="reason" required /></label>
      <button type="submit">Correct</button> <span role="status">${msg}</span>
    </form></details>`;
}

