// Chart wraps uPlot: time on x (seconds), one or more series.
import uPlot from "/vendor/uplot.mjs";
import { useEffect, useRef } from "/vendor/preact-hooks.mjs";
import { html } from "/lib/ui.js";

const palette = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed"];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

export function Chart({ id, title, data, series, yFormat }) {
  const box = useRef(null);
  const plot = useRef(null);
  const key = series.map((s) => s.label).join("|");
  useEffect(() => {
    const el = box.current;
    const axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--line"), width: 1 }, ticks: { stroke: cssVar("--line") } };
    const opts = {
      width: Math.max(el.clientWidth, 240), height: 180,
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: s.color || palette[i % palette.length], width: 2 }))],
      axes: [axis, { ...axis, values: yFormat ? (u, vals) => vals.map(yFormat) : undefined, size: 60 }],
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(el.clientWidth, 240), height: 180 }));
    ro.observe(el);
    return () => { ro.disconnect(); plot.current.destroy(); plot.current = null; };
  }, [key]);
  useEffect(() => { plot.current?.setData(data); }, [data]);
  return html`<figure class="panel chart" id=${id} aria-label=${title} style="margin:0">
    <figcaption><strong>${title}</strong></figcaption>
    <div ref=${box}></div>
  </figure>`;
}
