// The job health board, the landing view: a row per job, worst first,
// with its verdict, last run, duration against its usual one, next run
// and a strip of its recent runs (GET /api/v1/jobs/health). The stream
// extends the strips as its changes come (lib/stream.js applies them once
// a frame); the verdicts are read again a moment after.
import { Component } from "/vendor/preact.mjs";
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, Status, Verdict, VERDICTS, fmtAgo, fmtIn, fmtMs, fmtTime, fmtNum, today, NotAvailable } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { setFilter, onTasks, principal } from "/lib/stream.js";

const LIMIT = 500; // jobs on the board; the counts cover every job
const RUNS = 50; // runs in a strip
const FINAL = new Set(["success", "failed", "timeout"]);

// extend applies the tasks the stream delivered to the board's strips:
// a run already there takes its new state, a run reported after the board
// was read joins the end. Jobs not on the board wait for the next read.
// A job the batch leaves as it was keeps its object, and a batch that
// changes nothing returns the board itself: a row redraws only when its
// job changed (Row), and the board not at all.
function extend(board, list) {
  if (!board || !list.length) return board;
  const byName = new Map(board.jobs.map((j, i) => [j.name, i]));
  const changed = new Map(); // index on the board -> the job's new object
  for (const t of list) {
    const i = byName.get(t.name);
    if (i === undefined) continue;
    const was = changed.get(i) || board.jobs[i];
    const k = was.runs.findIndex((r) => r.taskID === t.taskID);
    if (k < 0 && t.updatedAt < board.now) continue; // the board already had it, or it left the strip
    const run = {
      taskID: t.taskID, status: t.status, late: t.late, startedAt: t.startedAt,
      reportedAt: k >= 0 ? was.runs[k].reportedAt : t.startedAt || t.updatedAt,
      finishedAt: FINAL.has(t.status) ? t.finishedAt : undefined, costMs: FINAL.has(t.status) ? t.costMs : undefined,
    };
    if (k >= 0 && sameRun(was.runs[k], run)) continue; // a snapshot repeats what the strip shows
    const job = changed.get(i) || { ...was, runs: was.runs.slice() };
    if (k >= 0) job.runs[k] = run;
    else job.runs = [...job.runs, run].slice(-RUNS);
    if (run.finishedAt && (!job.lastRun || run.finishedAt >= job.lastRun.finishedAt)) job.lastRun = run;
    changed.set(i, job);
  }
  if (!changed.size) return board;
  const jobs = board.jobs.slice();
  for (const [i, job] of changed) jobs[i] = job;
  return { ...board, jobs };
}

// keepRuns gives the board read again the run objects of the board shown
// where a run is as it was, so that a read draws again only the runs that
// changed (Run); every row draws again, its times being relative to the
// new read's clock.
function keepRuns(was, fresh) {
  if (!was) return fresh;
  const jobs = new Map(was.jobs.map((j) => [j.name, j]));
  for (const j of fresh.jobs) {
    const old = jobs.get(j.name);
    if (!old) continue;
    const runs = new Map(old.runs.map((r) => [r.taskID, r]));
    j.runs = j.runs.map((r) => {
      const o = runs.get(r.taskID);
      return o && sameRun(o, r) && o.reportedAt === r.reportedAt ? o : r;
    });
  }
  return fresh;
}

const sameRun = (a, b) => a.status === b.status && a.late === b.late && a.startedAt === b.startedAt &&
  a.finishedAt === b.finishedAt && a.costMs === b.costMs;

export function Board() {
  const q = new URLSearchParams(location.search);
  const [prefix, setPrefix] = useState(q.get("prefix") || "");
  const [only, setOnly] = useState(q.get("verdict") || "");
  const [board, setBoard] = useState(null);
  const [state, setState] = useState("loading"); // loading | ok | na | error
  const [reads, setReads] = useState(0); // bumping it reads the board again
  useEffect(() => {
    let stop = false;
    const t = setTimeout(() => {
      api(`/api/v1/jobs/health?limit=${LIMIT}&prefix=${encodeURIComponent(prefix)}`).then(
        (d) => { if (!stop) { setBoard((was) => keepRuns(was, d)); setState("ok"); } },
        (e) => { if (!stop) setState(e instanceof NotFound ? "na" : "error"); });
    }, reads === 0 ? 0 : 150);
    return () => { stop = true; clearTimeout(t); };
  }, [prefix, reads]);
  useEffect(() => {
    const p = new URLSearchParams();
    if (prefix) p.set("prefix", prefix);
    if (only) p.set("verdict", only);
    history.replaceState(null, "", "/" + (p.size ? "?" + p : ""));
  }, [prefix, only]);
  useEffect(() => {
    setFilter({ prefix, types: ["tasks"] });
    let again = null;
    const off = onTasks((list) => {
      setBoard((b) => extend(b, list));
      // Verdicts depend on the runs: read them again once the burst is over.
      clearTimeout(again);
      again = setTimeout(() => setReads((n) => n + 1), 2000);
    });
    // ... and on time passing (late, running too long, no recent runs).
    const tick = setInterval(() => setReads((n) => n + 1), 30_000);
    return () => { off(); clearTimeout(again); clearInterval(tick); };
  }, [prefix]);
  const tenant = principal.value?.tenant;
  const jobs = (board?.jobs || []).filter((j) => !only || j.verdict === only);
  return html`
    <h1>Job health${tenant ? html` <span class="muted">· tenant ${tenant}</span>` : ""}</h1>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label>Job prefix<input id="board-prefix" data-filter type="search" value=${prefix}
        onInput=${(e) => setPrefix(e.target.value)} placeholder="e.g. batch_" /></label>
      ${board ? html`<${Tally} board=${board} only=${only} setOnly=${setOnly} />` : ""}
    </form>
    ${state === "na" ? html`<${NotAvailable} what="Job health" />`
      : state === "error" ? html`<p class="errors">Could not load the job health.</p>`
      : state === "loading" ? html`<p class="muted">Loading…</p>`
      : board.total === 0 ? html`<p class="muted" id="board-empty">No job has reported a run${prefix ? ` under “${prefix}”` : ""} yet.
          Jobs appear here with their first run (<a href="/tasks">tasks</a>, docs/protocol.md).</p>`
      : html`<${Rows} jobs=${jobs} now=${board.now} />
        ${board.total > board.jobs.length ? html`<p class="muted">The ${fmtNum(board.jobs.length)} worst of ${fmtNum(board.total)} jobs; narrow the prefix to see others.</p>` : ""}`}`;
}

// Tally counts the jobs by verdict; a count filters the rows to it.
function Tally({ board, only, setOnly }) {
  return html`<div class="tabs tally" role="group" aria-label="Jobs by health">
    ${VERDICTS.filter(([v]) => board.verdicts[v] || v === only).map(([v, label]) => html`
      <button type="button" class=${"v-" + v} aria-pressed=${only === v} data-tally=${v}
        onClick=${() => setOnly(only === v ? "" : v)}>${fmtNum(board.verdicts[v] || 0)} ${label}</button>`)}
  </div>`;
}

function Rows({ jobs, now }) {
  return html`<div class="table-wrap"><table id="board" class="reflow">
    <thead><tr><th>Health</th><th>Job</th><th>Last run</th><th>Duration</th><th>Next run</th><th>Recent runs</th></tr></thead>
    <tbody>${jobs.map((j) => html`<${Row} key=${j.name} j=${j} now=${now} />`)}</tbody>
  </table></div>`;
}

// Row is one job's row. It draws again only when its job or the board's
// clock changed: under a storm of about 1 000 task changes a second, a
// stream batch changes a fifth of 500 jobs, and drawing every row with
// its fifty runs again for each batch kept the page's main thread busy in
// script most of the time (BenchmarkDashboardUnderAStorm).
class Row extends Component {
  shouldComponentUpdate(next) {
    return next.j !== this.props.j || next.now !== this.props.now;
  }

  render({ j, now }) {
    return html`<tr data-job=${j.name} data-verdict=${j.verdict}>
      <td data-label="Health"><${Verdict} v=${j.verdict} /></td>
      <td data-label="Job" class="job"><a href=${"/jobs/" + encodeURIComponent(j.name)}>${j.name}</a></td>
      <td data-label="Last run"><${LastRun} j=${j} now=${now} /></td>
      <td data-label="Duration"><${Duration} j=${j} now=${now} /></td>
      <td data-label="Next run">${j.nextRunAt ? html`<span title=${fmtTime(j.nextRunAt)}>${fmtIn(j.nextRunAt, now)}</span>` : html`<span class="muted">—</span>`}</td>
      <td data-label="Recent runs"><${Strip} runs=${j.runs} /></td>
    </tr>`;
  }
}

function LastRun({ j, now }) {
  const last = j.lastRun;
  return html`${last ? html`<${Status} s=${last.status} /> <span title=${fmtTime(last.finishedAt)}>${fmtAgo(last.finishedAt, now)}</span>`
      : html`<span class="muted">none finished</span>`}
    ${j.running ? html`<div class="muted">${fmtNum(j.running)} running${j.runningSince ? ` for ${fmtAgo(j.runningSince, now).replace(" ago", "")}` : ""}</div>` : ""}`;
}

// Duration is the last run's duration against the usual one; a run going
// on now is measured against it too.
function Duration({ j, now }) {
  const usual = j.usualCostMs;
  const cost = j.verdict === "running_long" ? now - j.runningSince : j.lastRun?.costMs;
  const slow = usual && cost > 2 * usual;
  return html`${cost ? html`<span class=${slow ? "slow" : ""}>${fmtMs(cost)}</span>` : html`<span class="muted">—</span>`}
    ${usual ? html`<div class="muted">usual ${fmtMs(usual)}${slow ? ` (×${(cost / usual).toFixed(1)})` : ""}</div>` : ""}`;
}

// Strip is the recent runs, oldest first, each a link to the run, coloured
// by its status; hovering shows its ID, time, duration and status. A run
// joining the end moves the others along: keyed by task ID, they keep
// their elements, and a run the stream left as it was is not drawn again.
export function Strip({ runs }) {
  const day = today();
  return html`<div class="strip" role="list" aria-label="recent runs, oldest first">
    ${runs.map((r) => html`<${Run} key=${r.taskID} r=${r} day=${day} />`)}
  </div>`;
}

// Run is one run of a strip; its tooltip's time has the date once the run
// is not of today (fmtTime), hence day.
class Run extends Component {
  shouldComponentUpdate(next) {
    return next.r !== this.props.r || next.day !== this.props.day;
  }

  render({ r }) {
    const when = r.startedAt || r.reportedAt;
    const tip = `${r.taskID} · ${fmtTime(when)} · ${r.costMs ? fmtMs(r.costMs) : r.status === "running" ? "running" : "no duration"} · ${r.status.replace("_", " ")}${r.late ? " · late" : ""}`;
    return html`<a role="listitem" class=${"run sb-" + r.status + (r.late ? " late" : "")} href=${"/tasks/" + encodeURIComponent(r.taskID)}
      title=${tip} aria-label=${tip} data-task=${r.taskID}></a>`;
  }
}
