// Requests tab: how often each platform endpoint was called for this run.
import { el, fmtNumber, isObject, notice } from "../dom.js";
import { simpleTable } from "../table.js";

export class RequestsTab {
  constructor(api, run) {
    this.run = run;
  }

  mount(panel) {
    const counters = isObject(this.run.requests) ? this.run.requests : {};
    const entries = Object.entries(counters).sort(([a], [b]) => a.localeCompare(b));
    if (entries.length === 0) {
      panel.append(notice("No requests were recorded for this run.", "requests-empty"));
      return;
    }
    panel.append(
      el("p", { class: "muted" }, "Calls the platform received for this run, by route."),
      simpleTable(
        "requests-table",
        [
          { key: "endpoint", label: "endpoint", cell: ([route]) => el("code", {}, route) },
          { key: "count", label: "count", numeric: true, cell: ([, count]) => fmtNumber(count) },
        ],
        entries,
        "request-row",
      ),
    );
  }
}
