// Runs list with reward, duration and error text, filtered by kind, status and text; refreshed
// while any run is still running or processing.
import { UnauthorizedError } from "../api.js";
import {
  ACTIVE_STATUSES,
  el,
  fmtCount,
  fmtDuration,
  fmtStat,
  fmtTime,
  kindBadge,
  normalStatus,
  notice,
  replaceChildren,
  runHref,
  statusBadge,
  truncate,
} from "../dom.js";
import { REFRESH_MS, runDuration } from "./run.js";

const STATUSES = ["RUNNING", "PROCESSING", "COMPLETED", "FAILED", "CANCELLED"];
const FILTERS_KEY = "prime-otel.local.runs-filters";

function searchable(run) {
  return [run.id, run.name, run.model, run.error_message, ...(run.tags ?? []), ...(run.environment_names ?? [])]
    .filter((v) => v !== null && v !== undefined)
    .join("\n")
    .toLowerCase();
}

function labelled(label, control) {
  return el("label", { class: "filter", for: control.id }, el("span", {}, label), control);
}

export class RunsView {
  constructor(api, onUnauthorized) {
    this.api = api;
    this.onUnauthorized = onUnauthorized;
    this.timer = null;
    this.disposed = false;
    this.runs = [];
    this.body = el("div", { class: "runs-body" });
    this.status = el("div", { class: "refresh-status", testid: "runs-refresh" });
    this.count = el("span", { class: "muted", testid: "runs-count", "aria-live": "polite" });
    const saved = this.savedFilters();
    this.search = el("input", {
      type: "search",
      id: "runs-search",
      testid: "runs-search",
      placeholder: "name, id, model, tag, error…",
      value: saved.text ?? "",
      oninput: () => this.filtersChanged(),
    });
    this.kind = el(
      "select",
      { id: "runs-kind", testid: "runs-kind", onchange: () => this.filtersChanged() },
      [
        ["", "All kinds"],
        ["eval", "Evaluations"],
        ["train", "Training"],
      ].map(([value, text]) => el("option", { value }, text)),
    );
    this.statusFilter = el(
      "select",
      { id: "runs-status", testid: "runs-status", onchange: () => this.filtersChanged() },
      [["", "Any status"], ...STATUSES.map((s) => [s, s.toLowerCase()])].map(([value, text]) =>
        el("option", { value }, text),
      ),
    );
    this.kind.value = saved.kind ?? "";
    this.statusFilter.value = saved.status ?? "";
  }

  async mount(root) {
    root.append(
      el("div", { class: "page-head" }, el("h1", {}, "Runs"), this.count, this.status),
      el(
        "div",
        { class: "toolbar filters", role: "search" },
        labelled("Search", this.search),
        labelled("Kind", this.kind),
        labelled("Status", this.statusFilter),
      ),
      this.body,
    );
    await this.refresh();
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
  }

  savedFilters() {
    try {
      return JSON.parse(window.sessionStorage.getItem(FILTERS_KEY) ?? "{}") ?? {};
    } catch {
      return {};
    }
  }

  filtersChanged() {
    const filters = { text: this.search.value, kind: this.kind.value, status: this.statusFilter.value };
    window.sessionStorage.setItem(FILTERS_KEY, JSON.stringify(filters));
    this.render();
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
    this.runs = runs;
    this.render();
    const active = runs.some((r) => ACTIVE_STATUSES.has(normalStatus(r.status)));
    this.status.textContent = active ? `Auto-refreshing every ${REFRESH_MS / 1000} s while runs are active` : "";
    this.status.dataset.active = String(active);
    if (active) this.schedule();
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  visible() {
    const text = this.search.value.trim().toLowerCase();
    const kind = this.kind.value;
    const status = this.statusFilter.value;
    return this.runs.filter(
      (run) =>
        (!kind || run.kind === kind) &&
        (!status || normalStatus(run.status) === status) &&
        (!text || searchable(run).includes(text)),
    );
  }

  render() {
    if (this.runs.length === 0) {
      this.count.textContent = "";
      replaceChildren(
        this.body,
        notice("No runs yet. Point an SDK at this server and start an eval or a training run.", "runs-empty"),
      );
      return;
    }
    const runs = this.visible();
    this.count.textContent =
      runs.length === this.runs.length ? `${this.runs.length} runs` : `${runs.length} of ${this.runs.length} runs`;
    const labels = ["run", "kind", "status", "reward", "episodes", "samples", "duration", "created (UTC)", "tags"];
    const numeric = new Set(["reward", "episodes", "samples", "duration"]);
    const head = el(
      "tr",
      {},
      labels.map((label) => el("th", { class: numeric.has(label) ? "num" : null, scope: "col" }, label)),
    );
    const rows = runs.map((run) => this.row(run));
    replaceChildren(
      this.body,
      rows.length
        ? el(
            "div",
            { class: "table-wrap" },
            el(
              "table",
              { class: "data clickable", testid: "runs-table" },
              el("thead", {}, head),
              el("tbody", {}, rows),
            ),
          )
        : notice("No run matches these filters.", "runs-none-match"),
    );
  }

  row(run) {
    const href = runHref(run.id);
    const open = (event) => {
      if (event.target.closest("a")) return;
      window.location.hash = href;
    };
    const status = normalStatus(run.status);
    return el(
      "tr",
      {
        testid: "run-row",
        "data-run-id": run.id,
        "data-status": status,
        "data-kind": run.kind,
        class: status === "FAILED" ? "row-error" : null,
        onclick: open,
      },
      el(
        "td",
        { class: "run-cell" },
        el(
          "a",
          { href, testid: "run-link", title: run.id },
          el("span", { testid: "run-name" }, run.name ?? "(unnamed run)"),
        ),
        el(
          "span",
          { class: "run-cell-sub" },
          el("code", {}, truncate(run.id ?? "", 28)),
          run.model ? el("span", { testid: "run-model" }, ` · ${run.model}`) : null,
        ),
        run.error_message
          ? el(
              "span",
              { class: "preview-error", testid: "run-error-text", title: run.error_message },
              truncate(run.error_message, 120),
            )
          : null,
      ),
      el("td", {}, kindBadge(run.kind)),
      el("td", {}, statusBadge(run.status)),
      el("td", { class: "num", testid: "run-reward" }, fmtStat(run.avg_reward)),
      el("td", { class: "num", testid: "run-episodes" }, fmtCount(run.num_episodes)),
      el("td", { class: "num", testid: "run-samples" }, run.kind === "train" ? "—" : fmtCount(run.num_samples)),
      el("td", { class: "num nowrap", testid: "run-duration" }, fmtDuration(runDuration(run))),
      el("td", { class: "nowrap", title: String(run.created_at ?? "") }, fmtTime(run.created_at)),
      el(
        "td",
        { testid: "run-tags" },
        (run.tags ?? []).map((t) => el("span", { class: "tag" }, String(t))),
      ),
    );
  }
}
