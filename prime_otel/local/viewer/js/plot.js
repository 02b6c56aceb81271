// A per-step line plot drawn as inline SVG: one polyline vertex and one marker per point.
import { fmtNumber, svg } from "./dom.js";

const WIDTH = 760;
const HEIGHT = 320;
const MARGIN = { top: 16, right: 20, bottom: 44, left: 68 };

// Round tick values (1, 2, 5 × 10^k) covering [lo, hi].
function niceTicks(lo, hi, count, integer) {
  if (lo === hi) {
    const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    return niceTicks(lo - pad, hi + pad, count, integer);
  }
  const raw = (hi - lo) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
  if (integer) step = Math.max(1, Math.round(step));
  const start = Math.floor(lo / step) * step;
  const ticks = [];
  for (let v = start; v <= hi + step * 1e-9 && ticks.length < 40; v += step) ticks.push(Number(v.toPrecision(12)));
  if (ticks[ticks.length - 1] < hi) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

function scale(domain, range) {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  return (v) => (d1 === d0 ? (r0 + r1) / 2 : r0 + ((v - d0) / (d1 - d0)) * (r1 - r0));
}

// points: [{x: step, y: value}] sorted by x.
export function linePlot(points, { xLabel, yLabel }) {
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const xTicks = niceTicks(Math.min(...xs), Math.max(...xs), 8, true);
  const yTicks = niceTicks(Math.min(...ys), Math.max(...ys), 5, false);
  const left = MARGIN.left;
  const right = WIDTH - MARGIN.right;
  const top = MARGIN.top;
  const bottom = HEIGHT - MARGIN.bottom;
  const sx = scale([xTicks[0], xTicks[xTicks.length - 1]], [left, right]);
  const sy = scale([yTicks[0], yTicks[yTicks.length - 1]], [bottom, top]);
  const coords = points.map((p) => [Number(sx(p.x).toFixed(2)), Number(sy(p.y).toFixed(2))]);

  return svg(
    "svg",
    {
      class: "plot",
      testid: "metrics-plot",
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      role: "img",
      "aria-label": `${yLabel} by ${xLabel}`,
    },
    svg(
      "g",
      { class: "grid", testid: "plot-y-axis" },
      yTicks.map((t) => [
        svg("line", { x1: left, x2: right, y1: sy(t), y2: sy(t) }),
        svg("text", { x: left - 8, y: sy(t), class: "tick y" }, fmtNumber(t, 6)),
      ]),
    ),
    svg(
      "g",
      { class: "axis", testid: "plot-x-axis" },
      svg("line", { x1: left, x2: right, y1: bottom, y2: bottom }),
      xTicks.map((t) => [
        svg("line", { x1: sx(t), x2: sx(t), y1: bottom, y2: bottom + 5 }),
        svg("text", { x: sx(t), y: bottom + 18, class: "tick x", testid: "plot-x-tick" }, String(t)),
      ]),
    ),
    svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: bottom }),
    svg("text", { class: "axis-label", x: (left + right) / 2, y: HEIGHT - 6 }, xLabel),
    svg(
      "text",
      { class: "axis-label", x: 14, y: (top + bottom) / 2, transform: `rotate(-90 14 ${(top + bottom) / 2})` },
      yLabel,
    ),
    svg("polyline", { class: "line", testid: "metrics-line", points: coords.map((c) => c.join(",")).join(" ") }),
    svg(
      "g",
      { class: "points" },
      points.map((p, i) =>
        svg(
          "circle",
          { cx: coords[i][0], cy: coords[i][1], r: 3.5, testid: "metrics-point", "data-step": p.x, "data-value": p.y },
          svg("title", {}, `step ${p.x}: ${fmtNumber(p.y, 6)}`),
        ),
      ),
    ),
  );
}
