// Runs list, refreshed while any run is still running or processing.
import {
  ACTIVE_STATUSES,
  el,
  fmtNumber,
  fmtTime,
  kindBadge,
  normalStatus,
  notice,
  replaceChildren,
  runHref,
  statusBadge,
  truncate,
} from "../dom.js";
import { UnauthorizedError } from "../api.js";

const REFRESH_MS = 3000;

export class RunsView {
  constructor(api, onUnauthorized) {
    this.api = api;
    this.onUnauthorized = onUnauthorized;
    this.timer = null;
    this.disposed = false;
    this.body = el("div", { class: "runs-body" });
    this.status = el("div", { class: "refresh-status", testid: "runs-refresh" });
  }

  async mount(root) {
    root.append(el("div", { class: "page-head" }, el("h1", {}, "Runs"), this.status), this.body);
    await this.refresh();
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
  }

  async refresh() {
    let runs;
    try {
      runs = await this.api.runs();
    } catch (error) {
      if (this.disposed) return;
      if (error instanceof UnauthorizedError) {
        this.onUnauthorized(error);
        return;
      }
      replaceChildren(this.status, notice(`Could not load runs: ${error.message}`, "error", "error"));
      this.schedule();
      return;
    }
    if (this.disposed) return;
    this.render(runs);
    const active = runs.some((r) => ACTIVE_STATUSES.has(normalStatus(r.status)));
    this.status.textContent = active ? `Auto-refreshing every ${REFRESH_MS / 1000} s while runs are active` : "";
    this.status.dataset.active = String(active);
    if (active) this.schedule();
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  render(runs) {
    if (runs.length === 0) {
      replaceChildren(
        this.body,
        notice("No runs yet. Point an SDK at this server and start an eval or a training run.", "runs-empty"),
      );
      return;
    }
    const head = el(
      "tr",
      {},
      ["id", "kind", "name", "status", "model", "created (UTC)", "samples", "episodes"].map((label, i) =>
        el("th", { class: i >= 6 ? "num" : null }, label),
      ),
    );
    const rows = runs.map((run) => {
      const href = runHref(run.id);
      const open = (event) => {
        if (event.target.closest("a")) return;
        window.location.hash = href;
      };
      return el(
        "tr",
        { testid: "run-row", "data-run-id": run.id, "data-status": normalStatus(run.status), onclick: open },
        el("td", {}, el("a", { href, testid: "run-link", title: run.id }, el("code", {}, truncate(run.id ?? "", 28)))),
        el("td", {}, kindBadge(run.kind)),
        el("td", { testid: "run-name" }, run.name ?? "—"),
        el("td", {}, statusBadge(run.status)),
        el("td", { class: "nowrap" }, run.model ?? "—"),
        el("td", { class: "nowrap", title: String(run.created_at ?? "") }, fmtTime(run.created_at)),
        el("td", { class: "num", testid: "run-samples" }, fmtNumber(run.num_samples)),
        el("td", { class: "num", testid: "run-episodes" }, fmtNumber(run.num_episodes)),
      );
    });
    replaceChildren(
      this.body,
      el(
        "div",
        { class: "table-wrap" },
        el("table", { class: "data clickable", testid: "runs-table" }, el("thead", {}, head), el("tbody", {}, rows)),
      ),
    );
  }
}
