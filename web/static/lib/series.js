// Series from the server's metrics for the charts: the whole range is
// loaded when a chart opens, then extended live. A finished run on the
// stream, or the clock passing a step, re-reads the newest two steps and
// merges them in, so the chart always equals what the server counted.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html } from "/lib/ui.js";
import { api, NotFound } from "/lib/api.js";
import { onTasks, reconnected } from "/lib/stream.js";

// RANGES are the ranges the picker offers: [name, window s, step s]. The
// metrics keep 24 h (their longest window), so the picker stops there.
export const RANGES = [["1h", 3600, 10], ["6h", 21600, 60], ["24h", 86400, 300]];

const FINAL = new Set(["success", "failed", "timeout"]);

// merge puts the fresh points into the series by time, keeping n points.
function merge(pts, fresh, n) {
  const byT = new Map(pts.map((p) => [p.t, p]));
  for (const p of fresh) byT.set(p.t, p);
  return [...byT.values()].sort((a, b) => a.t - b.t).slice(-n);
}

// useSeries loads the points of path (GET /api/v1/series or
// /api/v1/metrics/{name}) over the range, and keeps them live. It returns
// {state: loading | ok | na | error, points}.
export function useSeries(path, range) {
  const [res, setRes] = useState({ state: "loading", points: [] });
  useEffect(() => {
    const [, win, step] = RANGES.find(([name]) => name === range) || RANGES[0];
    const n = win / step;
    const url = (w) => `${path}${path.includes("?") ? "&" : "?"}window=${w}s&step=${step}s`;
    let stop = false;
    let pts = null;
    let busy = false;
    setRes({ state: "loading", points: [] });
    api(url(win)).then((d) => {
      if (stop) return;
      pts = d.points || [];
      setRes({ state: "ok", points: pts });
    }, (e) => { if (!stop) setRes({ state: e instanceof NotFound ? "na" : "error", points: [] }); });
    const extend = async () => {
      if (!pts || busy) return;
      busy = true;
      try {
        const d = await api(url(2 * step));
        if (stop) return;
        pts = merge(pts, d.points || [], n);
        setRes({ state: "ok", points: pts });
      } catch { /* the next tick tries again */ } finally { busy = false; }
    };
    let soon = null;
    const off = onTasks((list) => {
      if (!list.some((t) => FINAL.has(t.status)) || soon) return;
      soon = setTimeout(() => { soon = null; extend(); }, 1000);
    });
    const tick = setInterval(extend, Math.max(step, 10) * 1000);
    return () => { stop = true; off(); clearInterval(tick); clearTimeout(soon); };
  }, [path, range, reconnected.value]);
  return res;
}

export function RangePicker({ value, onChange, id }) {
  return html`<div class="tabs" role="group" aria-label="Range" id=${id}>
    ${RANGES.map(([name]) => html`<button type="button" aria-pressed=${value === name} data-range=${name}
      onClick=${() => onChange(name)}>${name}</button>`)}
  </div>`;
}

// columns turns points into uPlot's columns: x in seconds, then one
// column per getter.
export function columns(points, ...getters) {
  return [points.map((p) => p.t / 1000), ...getters.map((g) => points.map(g))];
}

// failureRate is (failed + timed out) / finished, or nothing when no run
// finished.
export const failureRate = (p) => (p.count ? ((p.failed || 0) + (p.timeout || 0)) / p.count : null);
