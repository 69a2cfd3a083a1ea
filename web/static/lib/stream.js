// The live stream client (docs/stream.md): one WebSocket for the whole app,
// reconnecting with exponential backoff and resuming from the last cursor.
// It keeps the state the pages read: tasks, alerts, metrics, system stats.
import { signal, batch } from "/vendor/signals.mjs";
import { api, token, refused, toast } from "/lib/api.js";
import { setServerTime } from "/lib/clock.js";

export const conn = signal("connecting"); // connecting | open | closed | unauthorized
export const connDetail = signal("");
export const connHint = signal(""); // what to do about it, from the server: the indicator's tooltip
export const principal = signal(null); // {name, role, tenant} from hello
export const tasks = signal(new Map()); // taskID -> task, the newest MAX_TASKS
export const alerts = signal(new Map()); // alert ID -> alert, from the stream
// The last read of the alerts: how many the server listed and how many it
// has (it lists at most 10 000, firing first); null before the first.
export const alertsListed = signal(null);
export const metrics = signal(null); // the last metric message's summaries
export const system = signal(null); // the last system message's stats
export const lastSync = signal(0); // when the last snapshot arrived
// listingError is the server's word that the last snapshot's listing
// failed (its error field): the tasks held are then not all that match.
export const listingError = signal("");
// reconnected counts the times the stream came back after it was down (a
// server restart, a network cut, a new sign-in). A page that reads its
// data once reads it in its effect's dependencies, so that what could not
// load while the server was away loads when it is back.
export const reconnected = signal(0);

const MAX_TASKS = 5000;
let ws = null;
let cursor = "";
let cursorToken = null; // the token whose stream the cursor is of
// filter is what the open page shows (setFilter); until a page says, the
// alerts alone.
let filter = { prefix: "", status: [], types: ["alert"] };
let left = null; // {key, cursor, tasks, token}: the filter of tasks left last (setFilter)
// unanswered counts the subscribes for tasks sent on this connection and
// not answered yet (a snapshot, or the tasks of a resume). The server
// answers each in order, after every message of the filter it replaces:
// until the last answer comes, a tasks, heartbeat or resync message is of
// a filter left, and neither its tasks nor its cursor are the page's. A
// cursor taken from one, kept by a connection that dropped before the
// answer, had the next connection resume the new filter from a position
// it never had: its tasks from before that position never came.
let unanswered = 0;
// kept says that the server refused the last subscribe for tasks (an
// error naming its field: docs/stream.md) and kept the filter before it:
// what comes is of that one, not the page's, until the next subscribe.
let kept = false;
let backoff = 500;
let retry = null;
let retryAt = 0; // Date.now() when retry fires
let opened = false;
let wasDown = false; // a connection closed since the last hello
const acks = new Map(); // alert ID -> resolve
// unsure holds the alerts whose ack was sent and not answered when the
// stream closed: the server may have made it. The next read of the
// alerts says which were.
const unsure = new Set();
let seen = null; // {name, tenant} of the last hello: whose data the signals hold
let alertsSinceRead = null; // alert ID -> alert, the changes since the newest read of the alerts began
const taskListeners = new Set();

function b64url(s) {
  const bytes = new TextEncoder().encode(s);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function connect() {
  clearTimeout(retry);
  if (ws) { ws.onclose = null; ws.close(); }
  const protos = ["apollo.v1"];
  const t = token();
  // A cursor is a position in one principal's stream: another token (a
  // sign-in here or in another tab) starts from a snapshot of its own.
  if (t !== cursorToken) cursor = "";
  cursorToken = t;
  if (t) protos.push("bearer." + b64url(t));
  const url = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/api/v1/stream`;
  conn.value = "connecting";
  opened = false;
  unanswered = 0;
  kept = false;
  ws = new WebSocket(url, protos);
  ws.onopen = () => {
    opened = true;
    backoff = 500;
    batch(() => { conn.value = "open"; connDetail.value = ""; connHint.value = ""; });
    subscribe(true);
  };
  ws.onmessage = (e) => {
    let m;
    try { m = JSON.parse(e.data); } catch { return; }
    handle(m);
  };
  ws.onclose = (e) => {
    ws = null;
    wasDown = true;
    for (const [id, done] of acks) {
      unsure.add(id);
      done({ ok: false, unknown: true, error: "the connection closed before the server answered" });
    }
    acks.clear();
    if (!opened) { checkAuth(); }
    const wait = Math.min(backoff, 30_000) * (0.75 + Math.random() / 2);
    backoff = Math.min(backoff * 2, 30_000);
    batch(() => {
      conn.value = "closed";
      connDetail.value = `${e.reason ? e.reason + "; " : ""}reconnecting in ${Math.ceil(wait / 1000)} s`;
      connHint.value = "";
    });
    retry = setTimeout(connect, wait);
    retryAt = Date.now() + wait;
  };
}

// A page the browser keeps after the user left it (the back-forward
// cache) would keep its stream, and the tenant's place on the server's
// limit, for as long as the browser keeps the page. It closes the stream
// when hidden that way, and connects again if the user comes back.
addEventListener("pagehide", (e) => {
  if (!e.persisted) return;
  clearTimeout(retry);
  if (ws) { ws.onclose = null; ws.close(1000, "page left"); ws = null; }
  wasDown = true;
  conn.value = "closed";
});
addEventListener("pageshow", (e) => { if (e.persisted) connect(); });

// A WebSocket that fails to open says nothing about why: ask the stream's
// address again, without the upgrade. The server checks the token and the
// stream limits before the upgrade, so the answer is the one the WebSocket
// got: 401, 429 (the tenant or the server holds as many streams as it
// may) or 503 (stopping), with the reason; or 426 (not a WebSocket) when
// nothing stands in the way.
async function checkAuth() {
  try {
    const sent = token();
    const headers = sent ? { Authorization: `Bearer ${sent}` } : {};
    const res = await fetch("/api/v1/stream", { headers, cache: "no-store" });
    if (res.status === 401) {
      // Refused: the token this asked with. One set since (a sign-in
      // while this was on its way) is not the refused one, and its own
      // connection is under way.
      if (token() !== sent) return;
      clearTimeout(retry);
      batch(() => {
        conn.value = "unauthorized";
        connDetail.value = "needs a token";
        principal.value = null; // the refused token's role no longer applies
        refused(sent);
      });
      return;
    }
    if (ws || (res.status !== 429 && res.status !== 503)) return; // connecting again already
    let body = null;
    try { body = await res.json(); } catch { /* no JSON: the status says enough */ }
    if (ws) return;
    const e = body?.error || {};
    const why = e.message || (res.status === 429 ? "too many streams open" : "the server is stopping");
    const wait = Math.max(retryAt - Date.now(), Number(res.headers.get("Retry-After")) * 1000 || 0);
    clearTimeout(retry);
    retry = setTimeout(connect, wait);
    retryAt = Date.now() + wait;
    batch(() => {
      conn.value = "closed";
      connDetail.value = `${why}; reconnecting in ${Math.ceil(wait / 1000)} s`;
      connHint.value = e.hint || "";
    });
  } catch { /* the server is down: keep retrying */ }
}

// onTasks calls fn with the tasks of every snapshot, and of the updates
// the stream delivered since the last frame, in order (the board and the
// charts extend themselves from them); it returns the function that
// stops it.
export function onTasks(fn) {
  taskListeners.add(fn);
  return () => taskListeners.delete(fn);
}

function tellTasks(list) {
  for (const fn of taskListeners) fn(list);
}

// setFilter changes what the stream sends to what the open page shows:
// {prefix, status: [...], types: [...]}, types among "tasks", "metric"
// and "system" (docs/stream.md). The alerts always come: every page keeps
// them (the Overview and the Alerts page show them, an ack left
// unanswered is settled from them). A page that names nothing is sent
// the alerts alone: every page was sent every kind, and a page that shows
// no metrics got the tenant's metric message (a row per job, every 10 s),
// the system message every 5 s and every task change, which the server
// built and wrote for each open dashboard (TestPageIsSentOnlyWhatItShowsInBrowser).
// A new filter of tasks starts from a fresh snapshot, which replaces the
// tasks held (kept meanwhile: while the server is away, a page shows what
// it last had). The last metric and system messages are dropped when the
// page no longer asks for them: one kept for an hour would be shown as
// live when the Jobs or System page opens again. A prefix longer than any
// name or task ID (256 bytes: a task's or job's address typed by hand)
// matches nothing, and the server would refuse it and keep the last
// filter: the page is sent the alerts alone.
//
// The tasks of the filter left last are kept with their cursor: a page
// that comes back to that filter (Tasks, a task, back to Tasks) gets them
// again and resumes from the cursor, so the server sends what changed
// meanwhile, or a snapshot if it no longer holds the changes since; each
// return was a new snapshot of the newest 500 tasks (about 130 KB).
export function setFilter(f) {
  let types = [...new Set(["alert", ...(f?.types || [])])].sort();
  let prefix = f?.prefix || "";
  if (new TextEncoder().encode(prefix).length > 256) [prefix, types] = ["", ["alert"]];
  const next = { prefix, status: f?.status || [], types };
  const key = JSON.stringify(next);
  if (key === JSON.stringify(filter)) return;
  applyTasks(); // the changes queued are of the filter left
  const back = left?.key === key && left.token === cursorToken ? left : null;
  left = cursor && filter.types.includes("tasks") ? { key: JSON.stringify(filter), cursor, tasks: tasks.value, token: cursorToken } : null;
  filter = next;
  cursor = back ? back.cursor : "";
  if (back) tasks.value = back.tasks;
  if (!types.includes("metric")) metrics.value = null;
  if (!types.includes("system")) system.value = null;
  subscribe(!!back);
}

function subscribe(resume) {
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  const msg = { type: "subscribe", filter };
  if (resume && cursor) msg.cursor = cursor;
  ws.send(JSON.stringify(msg));
  if (filter.types.includes("tasks")) unanswered++;
  kept = false;
}

// current reports whether a message of the stream's tasks (m: a tasks,
// snapshot or heartbeat message) is of the filter the page asked for
// last, and counts the answers to its subscribes. A filter without tasks
// is sent none: the tasks and cursors that still come are of the one it
// replaced.
function current(m) {
  const answer = (m.type === "snapshot" && m.reason !== "resync") || (m.type === "tasks" && m.resumed);
  if (answer && unanswered > 0) unanswered--;
  return unanswered === 0 && !kept && filter.types.includes("tasks");
}

// refusal reports whether an error message answers a subscribe, and
// counts it as the answer: the server names the field it could not use
// (cursor, filter.prefix, filter.status, filter.types) and keeps the
// filter it had. Counted as unanswered, it had every later answer taken
// for that one's and dropped, and the page followed the stream no more
// until the next reconnect. Only a subscribe for tasks is counted: the
// pages' other filters (the alerts, the metric or system message under
// a prefix of 256 bytes at most) are never refused.
function refusal(m) {
  if (!(m.field === "cursor" || m.field?.startsWith("filter.")) || unanswered === 0) return false;
  unanswered--;
  kept = unanswered === 0;
  return true;
}

export function ack(alertID) {
  if (!ws || ws.readyState !== WebSocket.OPEN) return null; // the caller uses REST
  return new Promise((resolve) => {
    acks.set(alertID, resolve);
    ws.send(JSON.stringify({ type: "ack", alert: alertID }));
  });
}

function newer(a, b) { // is task a not older than b?
  return !b || a.sequence > b.sequence || (a.sequence === b.sequence && a.updatedAt >= b.updatedAt);
}

function prune(m) {
  if (m.size <= MAX_TASKS) return m;
  const keep = [...m.values()].sort((a, b) => b.updatedAt - a.updatedAt).slice(0, MAX_TASKS);
  return new Map(keep.map((t) => [t.taskID, t]));
}

// The stream's task changes are applied at most once a frame, and the
// pages drawing them take at most half of the main thread. The hub sends
// a batch every 100 ms; under a storm, drawing each batch of the board
// or the tasks as it came kept the page busy nearly all the time, so that
// a key or a click waited behind it (BenchmarkDashboardUnderAStorm). The
// changes wait, in order, for the next frame and, after a frame that took
// long to draw, as long again; they are applied together then, at once in
// a hidden tab (which has no frames), or when MAX_PENDING of them wait.
const MAX_PENDING = 5000;
let pending = []; // task lists not applied yet, oldest first
let pendingCount = 0;
let frame = 0; // the requested frame that applies them
let pause = null; // the timer that requests it after a long frame
let notBefore = 0; // performance.now() before which no frame applies them

function queueTasks(list) {
  pending.push(list);
  pendingCount += list.length;
  if (document.hidden || pendingCount >= MAX_PENDING) applyTasks();
  else if (!frame && !pause) {
    const ahead = notBefore - performance.now();
    if (ahead > 0) pause = setTimeout(() => { pause = null; frame = requestAnimationFrame(applyTasks); }, ahead);
    else frame = requestAnimationFrame(applyTasks);
  }
}

function applyTasks() {
  const lists = pending;
  dropTasks();
  if (!lists.length) return;
  const start = performance.now();
  const next = new Map(tasks.value);
  for (const list of lists) {
    for (const t of list) {
      if (newer(t, next.get(t.taskID))) next.set(t.taskID, t);
    }
  }
  tasks.value = prune(next);
  tellTasks(lists.length === 1 ? lists[0] : lists.flat());
  // A task queued now runs once this frame is drawn: its cost is the
  // time until then (the pages' renders, style, layout and paint).
  const drawn = new MessageChannel();
  drawn.port1.onmessage = () => {
    const end = performance.now();
    notBefore = end + (end - start);
  };
  drawn.port2.postMessage(null);
}

function dropTasks() {
  cancelAnimationFrame(frame);
  clearTimeout(pause);
  frame = 0;
  pause = null;
  pending = [];
  pendingCount = 0;
}

function handle(m) {
  switch (m.type) {
    case "hello": {
      const p = m.principal || {};
      setServerTime(m.serverTime);
      batch(() => {
        // Signed in again with another token (after a 401): nothing the
        // last one was shown may stay on screen as this one's.
        if (seen && (seen.name !== p.name || seen.tenant !== p.tenant)) {
          left = null;
          dropTasks();
          tasks.value = new Map();
          alerts.value = new Map();
          alertsListed.value = null;
          metrics.value = null;
          // The system figures too: a tenant's show its own notification
          // channels (docs/security.md), and the System page prefers them
          // to what it reads (TestSystemPageOfOneTenantOnlyInBrowser).
          system.value = null;
          listingError.value = "";
        }
        seen = { name: p.name, tenant: p.tenant };
        principal.value = m.principal;
        // The last metric and system messages are of the stream that
        // closed, perhaps of a process that is gone: kept, they were shown
        // under the Live indicator until the new stream's next ones (up
        // to 10 s), and preferred to what the pages read. The pages read
        // their figures again at once (reconnected), and the new stream's
        // messages follow.
        if (wasDown) {
          metrics.value = null;
          system.value = null;
          reconnected.value++;
        }
        wasDown = false;
      });
      // The stream carries alert changes from now on; the alerts as they
      // are come from the API, on every (re)connect, and replace what the
      // page held (an alert may have resolved, or been forgotten, while
      // the stream was down).
      readAlerts().catch(() => {});
      break;
    }
    case "snapshot": {
      if (!current(m)) break;
      cursor = m.cursor;
      applyTasks(); // what came before it, in order
      const next = new Map();
      for (const t of m.tasks) next.set(t.taskID, t);
      batch(() => { tasks.value = next; lastSync.value = Date.now(); listingError.value = m.error || ""; });
      tellTasks(m.tasks);
      break;
    }
    case "tasks": {
      if (!current(m)) break;
      cursor = m.cursor;
      if (m.tasks.length) queueTasks(m.tasks);
      break;
    }
    case "heartbeat":
      if (m.cursor && current(m)) cursor = m.cursor;
      // Echo it: proof of life for the server where proxies eat pings.
      ws?.send(JSON.stringify({ type: "heartbeat" }));
      break;
    case "alerts_lost":
      // The server fell behind in an alert storm and lost changes: what
      // the page holds may miss alerts that fired meanwhile.
      readAlerts().catch(() => {});
      break;
    case "alert": {
      alertsSinceRead?.set(m.alert.id, m.alert);
      const next = new Map(alerts.value);
      next.set(m.alert.id, m.alert);
      alerts.value = next;
      break;
    }
    case "metric":
      // A server of an older release sent the timer's message, asked for
      // the prefix the page had when it started, after the answer to a new
      // prefix; it was kept as the page's until the next, 10 s on.
      if (filter.types.includes("metric") && (m.prefix || "") === filter.prefix) metrics.value = m.summaries;
      break;
    case "system":
      // As for metric: one asked for by a filter left, crossing the
      // subscribe that left it, is not the page's.
      if (filter.types.includes("system")) system.value = m.stats;
      break;
    case "ack_result": {
      const done = acks.get(m.alert);
      acks.delete(m.alert);
      done?.(m);
      break;
    }
    case "error":
      if (refusal(m)) {
        toast.value = `The server refused the page's filter (${m.field}: ${m.message})` + (kept ? ": what it shows is no longer live." : ".");
        break;
      }
      console.warn("stream:", m.message);
      break;
  }
}

// readAlerts reads the alerts as they are from GET /api/v1/alerts and
// replaces what the page holds with them, and the changes the stream
// delivered since the read began (the answer may have been read before
// them). A read overtaken by a newer one changes nothing: the newer one
// holds all it would. Every read of the alerts goes through here: a page
// that merged an answer of its own put back, after the stream's read, an
// alert as it was before a change (acknowledged meanwhile, it showed
// unacknowledged), or one gone since. It resolves when the page holds the
// answer (or a newer one), and rejects as api does.
export function readAlerts() {
  const since = alertsSinceRead = new Map();
  return api("/api/v1/alerts").then((d) => {
    if (since !== alertsSinceRead) return; // a newer read replaces them
    alertsSinceRead = null;
    const next = new Map((d.alerts || []).map((a) => [a.id, a]));
    for (const [id, a] of since) next.set(id, a);
    alerts.value = next;
    alertsListed.value = { listed: (d.alerts || []).length, total: d.total ?? (d.alerts || []).length };
    if (unsure.size) toast.value = [...unsure].map((id) => ackOutcome(id, next.get(id))).join(" ");
    unsure.clear();
  });
}

// ackOutcome says whether an ack left unanswered by a closed stream was
// made, from the alert as the API has it now.
function ackOutcome(id, a) {
  const name = a ? (a.group ? `${a.rule} (${a.group})` : a.rule) : id;
  if (a?.ackedBy) return `Acknowledged ${name}.`;
  if (!a || a.state === "resolved") return `${name} resolved before it was acknowledged: nothing to acknowledge.`;
  return `${name} was not acknowledged (the connection closed first): acknowledge it again.`;
}
