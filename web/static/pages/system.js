// System: Apollo-11's own health in plain words, grouped by component,
// each with a verdict and its figures in units (GET /api/v1/system, also
// pushed on the stream). A component this page does not know is still
// shown, as labelled figures, never as raw JSON.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, Card, fmtNum, fmtAgo, fmtNs, fmtBytes, fmtTime, plural, NotAvailable } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { system, setFilter, reconnected, conn } from "/lib/stream.js";
import { serverNow } from "/lib/clock.js";

// A component's verdict: ok; attention (something went wrong since the
// process started: worth a look); problem (wrong now).
const VERDICT = { ok: "ok", attention: "needs attention", problem: "problem" };

// judge returns the worst verdict among [condition, verdict, why] checks,
// and the reasons of those that hold.
function judge(checks) {
  const held = checks.filter(([cond]) => cond);
  const verdict = held.some(([, v]) => v === "problem") ? "problem" : held.length ? "attention" : "ok";
  return { verdict, notes: held.map(([, , why]) => why) };
}

const at = (t) => (t && !String(t).startsWith("0001-") ? Date.parse(t) : 0);

function alertCounts(m) {
  const parts = Object.entries(m || {}).filter(([, n]) => n > 0).map(([s, n]) => `${fmtNum(n)} ${s}`);
  return parts.length ? parts.join(", ") : "none firing or pending";
}

// Each describer turns one part of the system stats into
// {summary, facts: [[label, value]], checks}; ctx has the rate of
// accepted events and the time.
const DESCRIBE = {
  bus: (b, ctx) => ({
    title: "Ingest and tasks",
    summary: `${fmtNum(b.accepted)} events accepted${ctx.rate == null ? "" : `, ${fmtNum(Math.round(ctx.rate))} a second now`}; ${plural(b.tasks, "task")} in memory.`,
    facts: [["accepted", fmtNum(b.accepted)], ["refused (not stored)", fmtNum(b.refused)], ["duplicates", fmtNum(b.duplicate)],
      ["illegal transitions", fmtNum(b.illegal)], ["invalid events", fmtNum(b.invalid)], ["waited out of order", fmtNum(b.parked)],
      ["timeouts written", fmtNum(b.timeouts)], ["missed starts", fmtNum(b.missedStarts)], ["corrections", fmtNum(b.corrections)],
      ["tasks in memory", fmtNum(b.tasks)], ["changes queued", fmtNum(b.queued)],
      ["holding area", `${fmtNum(b.holding)} of ${fmtNum(b.holdLimit)}`], ["tombstones", fmtNum(b.tombstones)]],
    checks: [[b.holdLimit && b.holding > 0.9 * b.holdLimit, "problem", "the holding area is over 90% full: events will be refused"],
      [b.logErrors > 0, "problem", `${plural(b.logErrors, "record")} could not be written to the log`],
      // The count is of every refusal (a limit reached: the holding area,
      // the queues, the tasks in memory, a tenant's share; the server
      // stopping; the log failing), over every tenant: it does not say
      // which, and the page does not guess.
      [b.refused > 0, "attention", `${plural(b.refused, "event")} refused since start, of every tenant: answered retry_later and not stored (a limit reached, the server stopping, or the log failing); the reporters must resend them`],
      [b.subscribersCut > 0, "attention", `${plural(b.subscribersCut, "reader")} of the changes cut off for falling behind`]],
  }),
  // Refused by the ingest rate limit (429) before the bus: not in
  // bus.refused. A tenant's token sees its own; the operators every
  // tenant's, by name, and the open local mode's (no token).
  rateLimit: (r) => {
    const ts = Object.entries(r.tenants || {}).sort(([a], [b]) => (a < b ? -1 : 1));
    const line = (c) => `${plural(c.requests, "request")}, ${plural(c.events, "event")}`;
    return {
      title: "Ingest rate limit",
      summary: `${plural(r.requests, "request")} refused with 429 since start, ${plural(r.events, "event")} in those that were read; none reached the bus.`,
      facts: [["requests refused", fmtNum(r.requests)], ["their events (of those read)", fmtNum(r.events)],
        ...ts.map(([t, c]) => [t ? `tenant ${t}` : "default tenant", line(c)]),
        ...(r.anonymous ? [["no token (open local mode)", line(r.anonymous)]] : [])],
      checks: [[r.requests > 0, "attention", `${plural(r.requests, "request")} refused over a token's rate (limits.ingest_per_second, or the token's rate): the reporters must resend them after Retry-After`]],
    };
  },
  wal: (w) => ({
    title: "Write-ahead log",
    summary: `${fmtNum(w.Appends)} records, ${fmtBytes(w.Bytes)} written; last fsync ${fmtNs(w.SyncLatencyLast)}.`,
    facts: [["records appended", fmtNum(w.Appends)], ["written", fmtBytes(w.Bytes)], ["fsyncs", fmtNum(w.Syncs)],
      ["last fsync", fmtNs(w.SyncLatencyLast)], ["mean fsync", w.Syncs ? fmtNs(w.SyncLatencySum / w.Syncs) : "—"],
      ["longest fsync", fmtNs(w.SyncLatencyMax)], ["segment files", fmtNum(w.Segments)],
      ["on disk up to", `record ${fmtNum(w.DurableLSN)} of ${fmtNum(w.LastLSN)}`], ["torn tail cut at start", fmtBytes(w.Repaired)]],
    checks: [[w.SyncLatencyLast > 1e9, "problem", `the last fsync took ${fmtNs(w.SyncLatencyLast)}: the disk is slow`],
      [w.SyncLatencyMax > 1e9, "attention", `an fsync took ${fmtNs(w.SyncLatencyMax)}`],
      [w.Repaired > 0, "attention", `${fmtBytes(w.Repaired)} of a torn write were cut when the log was opened (a crash mid-write)`]],
  }),
  recovery: (r) => ({
    title: "Recovery at start",
    summary: `Recovered in ${fmtNs(r.seconds * 1e9)}, replaying ${plural(r.events, "log record")} after the snapshot.`,
    facts: [["took", fmtNs(r.seconds * 1e9)], ["records replayed", fmtNum(r.events)]], checks: [],
  }),
  metrics: (m) => ({
    title: "Metrics",
    summary: `${plural(m.Names, "job")} counted in ${fmtNum(m.Buckets)} ten-second buckets and ${fmtNum(m.Rollups)} one-minute rollups, ${fmtBytes(m.Bytes)}.`,
    facts: [["jobs", fmtNum(m.Names)], ["10 s buckets", fmtNum(m.Buckets)], ["1 min rollups", fmtNum(m.Rollups)], ["memory", fmtBytes(m.Bytes)],
      ["events too old to count", fmtNum(m.TooOld)], ["events too far ahead", fmtNum(m.TooNew)]],
    checks: [[m.TooOld + m.TooNew > 0, "attention", `${plural(m.TooOld + m.TooNew, "event")} not counted: a timestamp out of range (a reporter's clock?)`]],
  }),
  alert: (a, ctx) => {
    const last = at(a.lastEvaluation);
    return {
      title: "Alerting",
      summary: `${alertCounts(a.alerts)}; last evaluation ${last ? fmtAgo(last, ctx.now) : "not yet"}${last ? `, took ${fmtNs(a.lastDuration)}` : ""}.`,
      facts: [["last evaluation", last ? fmtAgo(last, ctx.now) : "not yet"], ["it took", fmtNs(a.lastDuration)],
        ["evaluations", fmtNum(a.evaluations)], ["rules", `${fmtNum(a.rateRules)} rate, ${fmtNum(a.eventRules)} event`],
        ["alerts", alertCounts(a.alerts)], ["notifications sent", fmtNum(a.sent)], ["held by another engine", fmtNum(a.deduped)],
        ["held back by silences", fmtNum(a.silenced)], ["dropped (queue full)", fmtNum(a.dropped)]],
      checks: [[last && ctx.now - last > 60_000, "problem", `no evaluation for ${fmtAgo(last, ctx.now).replace(" ago", "")}`],
        [a.evaluationErrors > 0, "attention", `${plural(a.evaluationErrors, "evaluation")} failed`],
        [a.dropped > 0, "attention", `${plural(a.dropped, "notification")} dropped: the delivery queue was full`],
        [a.lockErrors > 0, "attention", `${plural(a.lockErrors, "notification")} sent without the dedup lock`],
        [a.saveErrors > 0, "attention", `the alert state could not be saved ${plural(a.saveErrors, "time")}`]],
    };
  },
  notifications: (n) => {
    const chans = Object.entries(n.channels || {}).sort(([a], [b]) => (a < b ? -1 : 1));
    const sum = (k) => chans.reduce((x, [, c]) => x + (c[k] || 0), 0);
    return {
      title: "Channels",
      summary: `${plural(chans.length, "channel")}: ${plural(sum("sent"), "message")} sent, ${fmtNum(sum("failed"))} failed.`,
      facts: chans.map(([name, c]) => [name, `${fmtNum(c.sent)} sent, ${fmtNum(c.failed)} failed, ${fmtNum(c.retried)} retried, ` +
        `${fmtNum(c.gaveUp)} given up, ${fmtNum(c.dropped)} dropped, ${fmtNum(c.queueLen)} waiting`]),
      checks: [[sum("gaveUp") + sum("dropped") > 0, "attention", `${plural(sum("gaveUp") + sum("dropped"), "message")} never delivered (given up or dropped)`],
        [sum("failed") > 0, "attention", `${plural(sum("failed"), "attempt")} failed`],
        [n.unknownChannel > 0, "attention", `${plural(n.unknownChannel, "notification")} named a channel that does not exist`]],
    };
  },
  stream: (s) => ({
    title: "Live stream",
    summary: `${plural(s.clients, "client")} connected; ${fmtNum(s.messages)} messages sent.`,
    facts: [["clients", fmtNum(s.clients)], ["changes streamed", fmtNum(s.changes)], ["messages sent", fmtNum(s.messages)],
      ["snapshots", fmtNum(s.snapshots)], ["resumed", fmtNum(s.resumes)], ["resyncs", fmtNum(s.resyncs)],
      ["closed as too slow", fmtNum(s.closedSlow)], ["closed without pong", fmtNum(s.closedNoPong)]],
    checks: [[s.closedSlow > 0, "attention", `${plural(s.closedSlow, "client")} closed for reading too slowly`]],
  }),
  scheduler: (s) => ({
    title: "Scheduler",
    summary: `${fmtNum(s.runs)} runs started.`,
    facts: [["runs started", fmtNum(s.runs)], ["skipped (blocked)", fmtNum(s.skipped)], ["catch-up ticks dropped", fmtNum(s.missed)],
      ["report errors", fmtNum(s.reportErrors)], ["state file errors", fmtNum(s.stateErrors)]],
    checks: [[s.reportErrors > 0, "attention", `${plural(s.reportErrors, "report")} to the server failed`],
      [s.stateErrors > 0, "attention", `the state file failed ${plural(s.stateErrors, "time")}`]],
  }),
  redis: (r, ctx) => {
    const last = at(r.LastFlush);
    return {
      title: "Redis",
      summary: `Metrics copied to Redis ${fmtNum(r.Flushes)} times; last ${last ? fmtAgo(last, ctx.now) : "never"}.`,
      facts: [["flushes", fmtNum(r.Flushes)], ["failed", fmtNum(r.Failures)], ["last good flush", last ? fmtAgo(last, ctx.now) : "never"],
        ["jobs waiting", fmtNum(r.Dirty)], ["commands sent", fmtNum(r.Commands)], ["last error", r.LastError || "none"]],
      checks: [[r.LastError && (!last || ctx.now - last > 30_000), "problem", `Redis: ${r.LastError}`],
        [r.Failures > 0, "attention", `${plural(r.Failures, "flush")} failed`]],
    };
  },
  changeFeed: (f) => ({
    title: "Change feed to Redis",
    summary: `${fmtNum(f.sent)} changes published.`,
    facts: [["published", fmtNum(f.sent)], ["dropped", fmtNum(f.dropped)], ["errors", fmtNum(f.errors)]],
    checks: [[f.dropped + f.errors > 0, "attention", `${plural(f.dropped + f.errors, "change")} not published`]],
  }),
  components: (c) => {
    const kinds = Object.entries(c);
    return {
      title: "Processes",
      summary: kinds.map(([k, v]) => `${plural(v.alive, k + " process", k + " processes")}`).join(", ") + " alive.",
      facts: kinds.map(([k, v]) => [k, v.alive ? `${fmtNum(v.alive)} alive` : `none since ${fmtTime(at(v.downSince))}`]),
      checks: kinds.map(([k, v]) => [!v.alive, "problem", `no ${k} process is alive`]),
    };
  },
  cluster: (c) => {
    const parts = c.partitions || [];
    const lag = parts.reduce((n, p) => n + (p.lag || 0), 0);
    return {
      title: "Cluster",
      summary: `Node ${c.node} serves ${plural(parts.length, "partition")}; ${fmtNum(lag)} events not read yet.`,
      facts: [["node", c.node], ["leases", (c.leases || []).join(", ") || "none"],
        ...parts.map((p) => [`partition ${p.partition}`, `${fmtNum(p.applied)} applied, ${fmtNum(p.lag)} behind${p.error ? `, ${p.error}` : ""}`])],
      checks: parts.map((p) => [p.error, "problem", `partition ${p.partition}: ${p.error}`]),
    };
  },
  deadman: (d, ctx) => {
    const ok = at(d.lastOK);
    return {
      title: "Dead man's switch",
      summary: `Calls ${d.target} every ${d.every}; last answered ${ok ? fmtAgo(ok, ctx.now) : "never"}.`,
      facts: [["calls", d.target], ["every", d.every], ["sent", fmtNum(d.sent)], ["failed", fmtNum(d.failed)],
        ["last answered", ok ? fmtAgo(ok, ctx.now) : "never"], ["last error", d.lastError || "none"]],
      checks: [[d.lastError && !ok, "problem", `the watcher does not answer: ${d.lastError}`], [d.failed > 0, "attention", `${plural(d.failed, "call")} failed`]],
    };
  },
  process: (p) => ({
    title: "This process",
    summary: `apollo ${p.mode} on ${p.listen}.`,
    facts: [["mode", p.mode], ["listens on", p.listen], ["data directory", p.data]], checks: [],
  }),
};

// ORDER is the page's order: the data path, then the rest.
const ORDER = ["process", "bus", "rateLimit", "wal", "recovery", "metrics", "alert", "notifications", "stream", "scheduler",
  "redis", "changeFeed", "components", "cluster", "deadman"];

// words turns a key ("lastFlush") into words ("last flush").
const words = (k) => k.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();

// flat lists a value the page has no layout for as labelled figures.
function flat(v, label = "", out = []) {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flat(x, label ? `${label} › ${words(k)}` : words(k), out);
  } else {
    const text = Array.isArray(v) ? v.map((x) => (typeof x === "object" ? Object.values(x).join(" ") : x)).join(", ")
      : typeof v === "number" ? fmtNum(v) : typeof v === "boolean" ? (v ? "yes" : "no") : String(v ?? "—");
    out.push([label || "value", text]);
  }
  return out;
}

function describe(key, v, ctx) {
  const d = DESCRIBE[key];
  if (d) {
    const r = d(v, ctx);
    return { ...r, ...judge(r.checks) };
  }
  return { title: words(key), summary: "", facts: flat(v), verdict: "ok", notes: [] };
}

export function System() {
  const [polled, setPolled] = useState(null);
  const [state, setState] = useState("loading");
  const [rate, setRate] = useState(null);
  // A read that failed while figures were shown: {why, at, last}, last
  // the time of the last good read. The figures stay, marked stale,
  // rather than give way to an error that hides what was known.
  const [failed, setFailed] = useState(null);
  const [readAt, setReadAt] = useState(0);
  useEffect(() => setFilter({ types: ["system"] }), []);
  // Read at once when the stream comes back: the figures held are of
  // before, perhaps of a process that is gone, and so is the rate.
  useEffect(() => {
    let stop = false;
    let prev = null;
    setRate(null);
    const load = () => api("/api/v1/system").then((d) => {
      if (stop) return;
      const now = Date.now();
      // A count lower than the last read's is of a new process (started
      // from a snapshot, it counts from what it replayed): no rate until
      // the next read, rather than a negative one
      // (TestRateAcrossACounterResetInBrowser).
      if (prev && d.bus && d.bus.accepted >= prev.accepted) setRate(((d.bus.accepted - prev.accepted) * 1000) / (now - prev.at));
      else setRate(null);
      prev = d.bus ? { accepted: d.bus.accepted, at: now } : null;
      setPolled(d); setState("ok"); setFailed(null); setReadAt(now);
    }, (e) => {
      if (stop) return;
      if (e instanceof NotFound) { setState("na"); return; }
      // A server's message may be anything: it is shown as text, cut.
      setFailed({ why: String(e?.message || e).slice(0, 300), at: Date.now() });
      setState((s) => (s === "ok" ? s : "error"));
    });
    load();
    const t = setInterval(load, 5000);
    return () => { stop = true; clearInterval(t); };
  }, [reconnected.value]);
  if (state === "na") return html`<h1>System</h1><${NotAvailable} what="System health" />`;
  if (state !== "ok") return html`<h1>System</h1><p class="muted">${state === "error" ? "Could not load the system health." : "Loading…"}</p>`;
  const live = system.value && conn.value === "open";
  const d = system.value || polled;
  // Figures the stream keeps sending are not stale for a read that failed.
  const stale = !!failed && !live;
  const ctx = { rate, now: serverNow() };
  const keys = [...ORDER.filter((k) => d[k] != null), ...Object.keys(d).filter((k) => !ORDER.includes(k)).sort()];
  const parts = keys.map((k) => ({ key: k, ...describe(k, d[k], ctx) }));
  const lastEval = at(d.alert?.lastEvaluation);
  const worst = parts.some((p) => p.verdict === "problem") ? "problem" : parts.some((p) => p.verdict === "attention") ? "attention" : "ok";
  return html`
    <h1>System <span class=${"st sys-" + worst} id="sys-verdict">${VERDICT[worst]}</span></h1>
    ${failed ? html`<p class="errors" id="sys-stale" data-stale=${stale}>${stale ? "Stale: " : ""}the figures could not be read again at ${fmtTime(failed.at)} (${failed.why}).
      ${stale ? `Those below are of the last good read, ${fmtAgo(readAt, Date.now())}.` : "Those below come from the live stream."} Trying again every 5 s.</p>` : ""}
    <div class=${"cards" + (stale ? " stale" : "")} id="sys-cards">
      <${Card} id="card-rate" label="events accepted per second" value=${rate == null ? "…" : fmtNum(Math.round(rate))} />
      <${Card} id="card-last-eval" label="last evaluation" value=${d.alert ? (lastEval ? fmtAgo(lastEval, ctx.now) : "not yet") : "not here"} />
      <${Card} id="card-tasks" label="tasks in memory" value=${fmtNum(d.bus?.tasks)} />
      <${Card} id="card-firing" label="alerts firing" value=${fmtNum(d.alert?.alerts?.firing ?? 0)} bad=${d.alert?.alerts?.firing > 0} />
    </div>
    <div id="system" class=${stale ? "stale" : ""}>${parts.map((p) => html`<section class="panel component" id=${"sys-" + p.key} data-verdict=${p.verdict}>
      <h2>${p.title} <span class=${"st sys-" + p.verdict}>${VERDICT[p.verdict]}</span></h2>
      ${p.summary ? html`<p>${p.summary}</p>` : ""}
      ${p.notes.length ? html`<ul class="notes">${p.notes.map((n) => html`<li>${n}</li>`)}</ul>` : ""}
      <dl class="facts">${p.facts.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>
    </section>`)}</div>`;
}
