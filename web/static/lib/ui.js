// Shared view helpers: the html tag, formatting, small components.
import { h } from "/vendor/preact.mjs";
import htm from "/vendor/htm.mjs";
import { serverNow } from "/lib/clock.js";

// Text that others chose (task IDs, job names, extra, summaries, rule
// names, comments) is always set as text, never as markup. Some
// characters would still deceive the reader: a bidi override reverses
// what follows it ("report\u202eexe.txt" reads "reporttxt.exe"), a
// control character hides or breaks it. Every string the pages show, as
// text or in a tooltip, is written with those characters as visible
// escapes, as the CLI does (docs/cli.md): the C0 controls, DEL, the C1
// controls, the bidi controls and the line and paragraph separators.
// In <pre> and <textarea> newlines and tabs stay.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
const UNSAFE_IN_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
const ESCAPES = { "\t": "\\t", "\n": "\\n", "\r": "\\r" };
const escapeChar = (c) => ESCAPES[c] || "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");

const visible = (s) => s.replace(UNSAFE, escapeChar);

const TEXT_PROPS = ["title", "aria-label", "placeholder", "alt"];

function visibleChild(c, lines) {
  if (typeof c === "string") return c.replace(lines ? UNSAFE_IN_LINES : UNSAFE, escapeChar);
  return Array.isArray(c) ? c.map((x) => visibleChild(x, lines)) : c;
}

function hVisible(type, props, ...children) {
  if (typeof type === "string") {
    const lines = type === "pre" || type === "textarea";
    children = children.map((c) => visibleChild(c, lines));
    for (const k of TEXT_PROPS) {
      const v = props?.[k];
      const shown = typeof v === "string" ? visible(v) : v;
      if (shown !== v) props = { ...props, [k]: shown };
    }
  }
  return h(type, props, ...children);
}

export const html = htm.bind(hVisible);

// fmtTime is a time of today, or a date and time; a row that keeps what
// it drew while nothing changed (the board's runs, the tasks) draws again
// when today() changes.
export function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  return today() === d.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

export const today = () => new Date().toDateString();

// fmtSpan is a length of time in one unit, rounded: "45s", "4m", "3h", "2d".
export function fmtSpan(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.round(s / 60)}m`;
  if (s < 86400) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

export function fmtAgo(ms, now = serverNow()) {
  return ms ? `${fmtSpan(now - ms)} ago` : "—";
}

// fmtIn says how far ahead a time is ("in 4m"), or how long it is overdue.
export function fmtIn(ms, now = serverNow()) {
  if (!ms) return "—";
  return ms >= now ? `in ${fmtSpan(ms - now)}` : `${fmtSpan(now - ms)} overdue`;
}

export function fmtMs(ms) {
  if (ms == null || Number.isNaN(ms)) return "—";
  if (ms === 0) return "0 ms";
  if (ms > 0 && ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600_000) return `${(ms / 60000).toFixed(1)} min`;
  return `${(ms / 3600_000).toFixed(1)} h`;
}

// fmtNs is a duration in nanoseconds (Go's time.Duration in JSON).
export const fmtNs = (ns) => (ns == null ? "—" : fmtMs(ns / 1e6));

export function fmtBytes(n) {
  if (n == null) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

// plural: "1 run", "3 runs".
export const plural = (n, one, many = one + "s") => `${fmtNum(n)} ${n === 1 ? one : many}`;

export const fmtPct = (x) => (x == null || Number.isNaN(x) ? "—" : `${(x * 100).toFixed(1)}%`);
// One formatter for every number: Number.toLocaleString builds its own at
// each call, a measurable part of drawing the board under a storm.
const numbers = new Intl.NumberFormat();
export const fmtNum = (x) => (x == null ? "—" : numbers.format(Number(x)));

export function Status({ s }) {
  return html`<span class=${"st st-" + s}>${(s || "none").replace("_", " ")}</span>`;
}

// The job health verdicts (docs/dashboard.md), worst first, as people read
// them.
export const VERDICTS = [
  ["failing", "failing"], ["timing_out", "timing out"], ["running_long", "running too long"],
  ["late", "late"], ["no_recent_runs", "no recent runs"], ["ok", "ok"],
];
const verdictLabel = Object.fromEntries(VERDICTS);

export function Verdict({ v }) {
  return html`<span class=${"st v-" + v} data-verdict=${v}>${verdictLabel[v] || v}</span>`;
}

// NotAvailable is what a page shows while an endpoint answers 404.
export function NotAvailable({ what }) {
  return html`<p class="na" role="note">${what}: not available on this server yet.</p>`;
}

// Card is one figure; a bad one (failures, timeouts) is red.
export function Card({ label, value, id, bad }) {
  return html`<div class=${bad ? "card bad" : "card"} id=${id}><div class="n">${value}</div><div class="l">${label}</div></div>`;
}
