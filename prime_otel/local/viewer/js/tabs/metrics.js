// Metrics tab: one selectable metric plotted per step, and the rows as a table.
import { el, fmtNumber, fmtTime, notice, replaceChildren } from "../dom.js";
import { linePlot } from "../plot.js";
import { simpleTable } from "../table.js";

const RESERVED = new Set(["step", "_timestamp"]);

function metricNames(rows) {
  const names = new Set();
  for (const row of rows) {
    for (const [name, value] of Object.entries(row)) {
      if (!RESERVED.has(name) && typeof value === "number" && Number.isFinite(value)) names.add(name);
    }
  }
  return [...names].sort();
}

function preferred(names) {
  return names.find((n) => n === "reward") ?? names.find((n) => n.includes("reward")) ?? names[0];
}

function stepOf(row) {
  return typeof row.step === "number" && Number.isFinite(row.step) ? row.step : null;
}

export class MetricsTab {
  constructor(run) {
    this.rows = (Array.isArray(run.metric_rows) ? run.metric_rows : []).filter((r) => r && typeof r === "object");
    this.names = metricNames(this.rows);
    this.plotArea = el("div", { class: "plot-area" });
  }

  mount(panel) {
    if (this.names.length === 0) {
      panel.append(notice("No metric rows were logged for this run.", "empty"));
      return;
    }
    const select = el(
      "select",
      { testid: "metric-select", id: "metric-select", onchange: (e) => this.draw(e.target.value) },
      this.names.map((n) => el("option", { value: n }, n)),
    );
    select.value = preferred(this.names);
    panel.append(
      el("div", { class: "toolbar" }, el("label", { for: "metric-select" }, "Metric "), select),
      this.plotArea,
      el("h3", {}, `Rows (${this.rows.length})`),
      this.table(),
    );
    this.draw(select.value);
  }

  draw(name) {
    const points = this.rows
      .filter((r) => stepOf(r) !== null && typeof r[name] === "number" && Number.isFinite(r[name]))
      .map((r) => ({ x: r.step, y: r[name] }))
      .sort((a, b) => a.x - b.x);
    replaceChildren(
      this.plotArea,
      points.length
        ? linePlot(points, { xLabel: "step", yLabel: name })
        : notice(`No per-step values of ${name}.`, "empty"),
    );
  }

  table() {
    const sorted = [...this.rows].sort((a, b) => (stepOf(a) ?? Infinity) - (stepOf(b) ?? Infinity));
    const columns = [
      { key: "step", label: "step", numeric: true, cell: (r) => fmtNumber(r.step) },
      { key: "_timestamp", label: "time (UTC)", cell: (r) => fmtTime(r._timestamp) },
      ...this.names.map((n) => ({ key: n, label: n, numeric: true, cell: (r) => fmtNumber(r[n]) })),
    ];
    return simpleTable("metrics-table", columns, sorted, "metrics-row");
  }
}
