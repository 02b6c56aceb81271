// Inline-SVG charts: a small per-step line panel with hover and keyboard read-out, and a histogram.
import { el, fmtCount, fmtNumber, plural, svg } from "./dom.js";

// Round tick values (1, 2, 5 × 10^k) covering [lo, hi].
export function niceTicks(lo, hi, count, integer = false) {
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

function scale([d0, d1], [r0, r1]) {
  return (v) => (d1 === d0 ? (r0 + r1) / 2 : r0 + ((v - d0) / (d1 - d0)) * (r1 - r0));
}

const LINE = { width: 340, height: 168, top: 10, right: 14, bottom: 24, left: 50 };
const MAX_MARKERS = 60;

// One panel: `name` plotted over step. points: [{x: step, y: value}] sorted by x.
export function metricPanel(name, points) {
  const { width, height, top, right, bottom, left } = LINE;
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const xTicks = niceTicks(Math.min(...xs), Math.max(...xs), 4, true);
  const yTicks = niceTicks(Math.min(...ys), Math.max(...ys), 3);
  const plotBottom = height - bottom;
  const plotRight = width - right;
  const sx = scale([xTicks[0], xTicks[xTicks.length - 1]], [left, plotRight]);
  const sy = scale([yTicks[0], yTicks[yTicks.length - 1]], [plotBottom, top]);
  const coords = points.map((p) => [Number(sx(p.x).toFixed(2)), Number(sy(p.y).toFixed(2))]);
  const last = points[points.length - 1];

  const crosshair = svg("line", { class: "crosshair", y1: top, y2: plotBottom, visibility: "hidden" });
  const focusDot = svg("circle", { class: "focus-dot", r: 4, visibility: "hidden" });
  const overlay = svg("rect", {
    class: "overlay",
    x: left,
    y: top,
    width: plotRight - left,
    height: plotBottom - top,
    testid: "chart-overlay",
  });
  const chart = svg(
    "svg",
    { class: "plot small", viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true" },
    svg(
      "g",
      { class: "grid" },
      yTicks.map((t) => [
        svg("line", { x1: left, x2: plotRight, y1: sy(t), y2: sy(t) }),
        svg("text", { x: left - 6, y: sy(t), class: "tick y" }, fmtNumber(t, 6)),
      ]),
    ),
    svg(
      "g",
      { class: "axis" },
      svg("line", { x1: left, x2: plotRight, y1: plotBottom, y2: plotBottom }),
      xTicks.map((t) =>
        svg("text", { x: sx(t), y: plotBottom + 15, class: "tick x", testid: "plot-x-tick" }, String(t)),
      ),
    ),
    svg("polyline", {
      class: "line",
      testid: "metrics-line",
      "data-metric": name,
      points: coords.map((c) => c.join(",")).join(" "),
    }),
    points.length <= MAX_MARKERS
      ? svg(
          "g",
          { class: "points" },
          points.map((p, i) =>
            svg("circle", {
              cx: coords[i][0],
              cy: coords[i][1],
              r: 2.4,
              testid: "metrics-point",
              "data-step": p.x,
              "data-value": p.y,
            }),
          ),
        )
      : null,
    crosshair,
    focusDot,
    overlay,
  );
  const tooltip = el("div", { class: "chart-tooltip", testid: "chart-tooltip", hidden: true });
  const readout = el("div", { class: "visually-hidden", "aria-live": "polite" });
  const frame = el(
    "div",
    {
      class: "chart-frame",
      tabindex: 0,
      role: "group",
      "aria-label": `${name} by step, ${points.length} points; arrow keys read the values`,
    },
    chart,
    tooltip,
    readout,
  );

  let current = -1;
  const show = (index) => {
    current = Math.max(0, Math.min(points.length - 1, index));
    const [cx, cy] = coords[current];
    for (const [attr, value] of [
      ["x1", cx],
      ["x2", cx],
    ])
      crosshair.setAttribute(attr, value);
    focusDot.setAttribute("cx", cx);
    focusDot.setAttribute("cy", cy);
    crosshair.setAttribute("visibility", "visible");
    focusDot.setAttribute("visibility", "visible");
    const text = `step ${points[current].x}: ${fmtNumber(points[current].y, 6)}`;
    tooltip.textContent = text;
    tooltip.hidden = false;
    tooltip.style.left = `${(cx / width) * 100}%`;
    tooltip.style.top = `${(cy / height) * 100}%`;
    tooltip.classList.toggle("flip", cx > width * 0.6);
    readout.textContent = text;
  };
  const hide = () => {
    current = -1;
    crosshair.setAttribute("visibility", "hidden");
    focusDot.setAttribute("visibility", "hidden");
    tooltip.hidden = true;
  };
  const nearest = (clientX) => {
    const box = chart.getBoundingClientRect();
    const x = ((clientX - box.left) / box.width) * width;
    let best = 0;
    for (let i = 1; i < coords.length; i += 1) if (Math.abs(coords[i][0] - x) < Math.abs(coords[best][0] - x)) best = i;
    return best;
  };
  overlay.addEventListener("pointermove", (event) => show(nearest(event.clientX)));
  overlay.addEventListener("pointerleave", hide);
  frame.addEventListener("blur", hide);
  frame.addEventListener("keydown", (event) => {
    const moves = { ArrowLeft: current - 1, ArrowRight: current + 1, Home: 0, End: points.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    show(current < 0 ? points.length - 1 : moves[event.key]);
  });

  return el(
    "figure",
    { class: "metric-panel", testid: "metric-panel", "data-metric": name },
    el(
      "figcaption",
      {},
      el("span", { class: "metric-name", testid: "metric-panel-name" }, name),
      el("span", { class: "metric-last", testid: "metric-panel-last" }, fmtNumber(last.y)),
    ),
    frame,
  );
}

const HIST = { width: 560, height: 190, top: 16, right: 12, bottom: 30, left: 44 };

// bins: [{lo, hi, count}] from the server.
export function histogram(bins, { label = "reward", noun = "row" } = {}) {
  const { width, height, top, right, bottom, left } = HIST;
  const max = Math.max(1, ...bins.map((b) => b.count));
  const yTicks = niceTicks(0, max, 3, true);
  const plotBottom = height - bottom;
  const sy = scale([0, yTicks[yTicks.length - 1]], [plotBottom, top]);
  const slot = (width - left - right) / bins.length;
  const edges = bins.length > 1 ? [...bins.map((b) => b.lo), bins[bins.length - 1].hi] : [bins[0].lo];
  const labelEvery = bins.length > 6 ? 2 : 1;
  return el(
    "figure",
    { class: "histogram", testid: "reward-histogram" },
    svg(
      "svg",
      {
        class: "plot hist",
        viewBox: `0 0 ${width} ${height}`,
        role: "img",
        "aria-label": `${label} histogram: ${bins.map((b) => `${fmtNumber(b.lo)} to ${fmtNumber(b.hi)}: ${b.count}`).join("; ")}`,
      },
      svg(
        "g",
        { class: "grid" },
        yTicks.map((t) => [
          svg("line", { x1: left, x2: width - right, y1: sy(t), y2: sy(t) }),
          svg("text", { x: left - 6, y: sy(t), class: "tick y" }, String(t)),
        ]),
      ),
      bins.map((b, i) => {
        const x = left + i * slot + 2;
        const y = sy(b.count);
        return svg(
          "g",
          {},
          svg(
            "rect",
            {
              class: "bar",
              x,
              y,
              width: Math.max(1, slot - 4),
              height: Math.max(0, plotBottom - y),
              testid: "histogram-bar",
              "data-lo": b.lo,
              "data-hi": b.hi,
              "data-count": b.count,
            },
            svg("title", {}, `${label} ${fmtNumber(b.lo)}–${fmtNumber(b.hi)}: ${plural(b.count, noun)}`),
          ),
          b.count ? svg("text", { class: "bar-count", x: x + (slot - 4) / 2, y: y - 4 }, fmtCount(b.count)) : null,
        );
      }),
      svg("line", { class: "axis", x1: left, x2: width - right, y1: plotBottom, y2: plotBottom }),
      edges.map((edge, i) =>
        i % labelEvery === 0 || i === edges.length - 1
          ? svg(
              "text",
              { class: "tick x", x: left + i * slot + (bins.length === 1 ? slot / 2 : 0), y: plotBottom + 16 },
              fmtNumber(edge, 3),
            )
          : null,
      ),
    ),
    el(
      "figcaption",
      { class: "muted" },
      `${label} of ${plural(
        bins.reduce((s, b) => s + b.count, 0),
        noun,
      )}`,
    ),
  );
}
