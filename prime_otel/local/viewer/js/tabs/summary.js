// Summary tab: the run's summary metrics and how often each endpoint was called for it.
import { el, fmtJson, fmtNumber, notice } from "../dom.js";
import { simpleTable } from "../table.js";

export class SummaryTab {
  constructor(run) {
    this.run = run;
  }

  mount(panel) {
    const summary = this.run.summary;
    const hasSummary = summary && typeof summary === "object" && Object.keys(summary).length > 0;
    panel.append(
      el("h3", {}, "Summary metrics"),
      hasSummary
        ? el("pre", { class: "json", testid: "summary-json" }, fmtJson(summary))
        : notice("No summary metrics yet.", "summary-empty"),
      el("h3", {}, "Requests"),
      this.requests(),
    );
  }

  requests() {
    const counters = this.run.requests && typeof this.run.requests === "object" ? this.run.requests : {};
    const entries = Object.entries(counters).sort(([a], [b]) => a.localeCompare(b));
    if (entries.length === 0) return notice("No requests were recorded for this run.", "requests-empty");
    return simpleTable(
      "requests-table",
      [
        { key: "endpoint", label: "endpoint", cell: ([route]) => el("code", {}, route) },
        { key: "count", label: "count", numeric: true, cell: ([, count]) => fmtNumber(count) },
      ],
      entries,
      "request-row",
    );
  }
}
