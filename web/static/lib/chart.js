// Chart wraps uPlot: time on x (seconds), one or more series. The legend
// shows the values under the cursor, and the newest values when the
// cursor is elsewhere (never "--").
import uPlot from "/vendor/uplot.mjs";
import { useEffect, useRef } from "/vendor/preact-hooks.mjs";
import { html, fmtNum } from "/lib/ui.js";

// The colours of the charts: a failure is red on every chart, a timeout
// too (dashed, to tell it from a failure).
export const COLOR = { success: "#16a34a", failure: "#dc2626", info: "#2563eb", other: "#7c3aed" };
export const failureSeries = [
  { label: "failed", color: COLOR.failure },
  { label: "timed out", color: COLOR.failure, dash: [6, 4] },
];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

// newest returns the index of the last x that has a value in some series.
function newest(u) {
  for (let i = u.data[0].length - 1; i >= 0; i--) {
    for (let s = 1; s < u.data.length; s++) if (u.data[s][i] != null) return i;
  }
  return u.data[0].length - 1;
}

function showNewest(u) {
  if (u.cursor.idx == null && u.data[0].length > 0) u.setLegend({ idx: newest(u) }, false);
}

function timeLabel(v) {
  if (v == null) return "—";
  const d = new Date(v * 1000);
  return new Date().toDateString() === d.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

// sum adds every value of every series: the page and its tests read it
// (data-sum) to know what the chart holds.
function sum(data) {
  let n = 0;
  for (let s = 1; s < data.length; s++) for (const v of data[s]) n += v || 0;
  return Math.round(n * 1000) / 1000;
}

export function Chart({ id, title, data, series, yFormat }) {
  const box = useRef(null);
  const plot = useRef(null);
  const key = series.map((s) => s.label).join("|");
  const fmt = yFormat || fmtNum;
  useEffect(() => {
    const el = box.current;
    const axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--line"), width: 1 }, ticks: { stroke: cssVar("--line") } };
    const opts = {
      width: Math.max(el.clientWidth, 240), height: 180,
      series: [{ label: "Time", value: (u, v) => timeLabel(v) },
        ...series.map((s) => ({ label: s.label, stroke: s.color, dash: s.dash, width: 2, value: (u, v) => (v == null ? "—" : fmt(v)),
          // A rate has gaps (steps where nothing finished): dots show the
          // steps that have one.
          points: s.dots ? { show: true, size: 6, fill: s.color } : undefined }))],
      // The y axis's labels as drawn go to data-yticks too, for the tests.
      axes: [axis, { ...axis, size: 72, values: (u, vals) => {
        const labels = vals.map(fmt);
        el.parentElement.dataset.yticks = labels.join("|");
        return labels;
      } }],
      // Every series counts or measures from zero (runs, rates,
      // durations): the axis starts there, so a flat line of 6 s reads
      // as 6 s on a scale, not as "6.0 s" at every tick of a sliver.
      // A tenth above the top leaves room; uPlot's own rounding doubled
      // it (a rate of 100% on a scale to 200%).
      scales: { y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 1] } },
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false } },
      hooks: { setCursor: [showNewest], ready: [showNewest] },
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(el.clientWidth, 240), height: 180 }));
    ro.observe(el);
    return () => { ro.disconnect(); plot.current.destroy(); plot.current = null; };
  }, [key]);
  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    u.setData(data);
    showNewest(u);
  }, [data]);
  return html`<figure class="panel chart" id=${id} aria-label=${title} data-points=${data[0].length} data-sum=${sum(data)}>
    <figcaption><strong>${title}</strong></figcaption>
    <div ref=${box}></div>
  </figure>`;
}
