// Shared view helpers: the html tag, formatting, small components.
import { h } from "/vendor/preact.mjs";
import htm from "/vendor/htm.mjs";

export const html = htm.bind(h);

export function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

export function fmtAgo(ms, now = Date.now()) {
  if (!ms) return "—";
  const s = Math.round((now - ms) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function fmtMs(ms) {
  if (ms == null || Number.isNaN(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

export const fmtPct = (x) => (x == null || Number.isNaN(x) ? "—" : `${(x * 100).toFixed(1)}%`);
export const fmtNum = (x) => (x == null ? "—" : Number(x).toLocaleString());

export function Status({ s }) {
  return html`<span class=${"st st-" + s}>${s || "none"}</span>`;
}

// NotAvailable is what a page shows while an endpoint answers 404.
export function NotAvailable({ what }) {
  return html`<p class="na" role="note">${what}: not available on this server yet.</p>`;
}

export function Card({ label, value, id }) {
  return html`<div class="card" id=${id}><div class="n">${value}</div><div class="l">${label}</div></div>`;
}
