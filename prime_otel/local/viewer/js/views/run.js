// One run: a header and a tab per kind of data. While the run is running or processing, the header,
// the overview's cards and charts and the visible table refresh every few seconds; polling stops
// once the run is terminal.
import { ApiError, UnauthorizedError } from "../api.js";
import {
  ACTIVE_STATUSES,
  el,
  epochSeconds,
  fmtCount,
  fmtDuration,
  fmtTime,
  kindBadge,
  normalStatus,
  notice,
  replaceChildren,
  runHref,
  statusBadge,
} from "../dom.js";
import { ConfigTab } from "../tabs/config.js";
import { EpisodesTab } from "../tabs/episodes.js";
import { OverviewTab } from "../tabs/overview.js";
import { RequestsTab } from "../tabs/requests.js";
import { SamplesTab } from "../tabs/samples.js";
import { StepsTab } from "../tabs/steps.js";

export const REFRESH_MS = 3000;

const TABS = {
  overview: { label: "Overview", make: (api, run, stats) => new OverviewTab(api, run, stats) },
  samples: { label: "Samples", make: (api, run, stats) => new SamplesTab(api, run, stats) },
  episodes: { label: "Episodes", make: (api, run, stats, route) => new EpisodesTab(api, run, stats, route) },
  steps: { label: "Steps", make: (api, run) => new StepsTab(api, run) },
  config: { label: "Config", make: (api, run) => new ConfigTab(run) },
  requests: { label: "Requests", make: (api, run) => new RequestsTab(api, run) },
};

function tabsFor(kind) {
  return kind === "train"
    ? ["overview", "steps", "episodes", "config", "requests"]
    : ["overview", "samples", "episodes", "config", "requests"];
}

function names(run) {
  if (Array.isArray(run.environment_names) && run.environment_names.length) return run.environment_names.join(", ");
  if (!Array.isArray(run.environments) || run.environments.length === 0) return "—";
  return run.environments.map((v) => (v && typeof v === "object" ? (v.name ?? v.id ?? "?") : String(v))).join(", ");
}

function tags(run) {
  const list = Array.isArray(run.tags) ? run.tags : [];
  if (!list.length) return "—";
  return el(
    "span",
    { class: "tags" },
    list.map((t) => el("span", { class: "tag" }, String(t))),
  );
}

export function runDuration(run) {
  const start = epochSeconds(run.created_at);
  const active = ACTIVE_STATUSES.has(normalStatus(run.status));
  const end = active ? Date.now() / 1000 : epochSeconds(run.updated_at);
  return start === null || end === null ? null : Math.max(0, end - start);
}

function fact(label, value, testid) {
  return el("div", {}, el("dt", {}, label), el("dd", { testid }, value));
}

export class RunView {
  constructor(api, route, onUnauthorized) {
    this.api = api;
    this.id = route.id;
    this.route = route;
    this.onUnauthorized = onUnauthorized;
    this.disposed = false;
    this.timer = null;
    this.tab = null;
    this.stats = null;
    this.header = el("section", { class: "run-head", testid: "run-header" });
    this.tabBar = el("div", { class: "tabs", role: "tablist", "aria-label": "Run sections" });
    this.panel = el("section", { class: "tab-panel", role: "tabpanel", id: "run-tab-panel", testid: "tab-panel" });
  }

  async mount(root) {
    root.append(el("a", { class: "back", href: "#/runs", testid: "back-to-runs" }, "← All runs"), this.header);
    let run;
    try {
      [run, this.stats] = await Promise.all([this.api.run(this.id), this.loadStats()]);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        root.append(notice(`No run with id ${this.id} on this server.`, "run-missing", "error"));
        return;
      }
      throw error;
    }
    if (this.disposed) return;
    this.run = run;
    this.renderHeader(run);
    const tabNames = tabsFor(run.kind);
    const first = tabNames.includes(this.route.tab) ? this.route.tab : tabNames[0];
    replaceChildren(
      this.tabBar,
      tabNames.map((name) =>
        el(
          "button",
          {
            type: "button",
            role: "tab",
            id: `tab-${name}`,
            "aria-controls": "run-tab-panel",
            "data-tab": name,
            testid: `tab-${name}`,
            onclick: () => this.select(name, true),
            onkeydown: (event) => this.moveFocus(event, tabNames, name),
          },
          TABS[name].label,
        ),
      ),
    );
    root.append(this.tabBar, this.panel);
    this.schedule(run);
    await this.select(first, false, this.route.item);
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
  }

  async loadStats() {
    try {
      return await this.api.stats(this.id);
    } catch (error) {
      if (error instanceof UnauthorizedError) throw error;
      return null; // The cards fall back to the run's own summary.
    }
  }

  moveFocus(event, tabNames, name) {
    const at = tabNames.indexOf(name);
    const moves = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabNames.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const next = tabNames[(moves[event.key] + tabNames.length) % tabNames.length];
    this.tabBar.querySelector(`[data-tab="${next}"]`).focus();
    this.select(next, true);
  }

  async select(name, remember, item = null) {
    for (const button of this.tabBar.querySelectorAll("button")) {
      const selected = button.dataset.tab === name;
      button.setAttribute("aria-selected", String(selected));
      button.setAttribute("tabindex", selected ? "0" : "-1");
      button.classList.toggle("selected", selected);
    }
    this.panel.setAttribute("aria-labelledby", `tab-${name}`);
    if (remember) {
      const href = runHref(this.id, name);
      window.history.replaceState(null, "", `${window.location.pathname}${window.location.search}${href}`);
    }
    const panel = el("div", { testid: `panel-${name}` });
    replaceChildren(this.panel, panel);
    const tab = TABS[name].make(this.api, this.run, this.stats, { item });
    this.tab = tab;
    try {
      await tab.mount(panel);
    } catch (error) {
      if (error instanceof UnauthorizedError) {
        this.onUnauthorized(error);
        return;
      }
      panel.append(notice(`Could not load ${TABS[name].label.toLowerCase()}: ${error.message}`, "error", "error"));
    }
  }

  renderHeader(run) {
    const status = normalStatus(run.status);
    const live = ACTIVE_STATUSES.has(status);
    const train = run.kind === "train";
    const rows = Array.isArray(run.metric_rows) ? run.metric_rows : [];
    const objects = Array.isArray(run.objects) ? run.objects : [];
    const steps = rows.map((r) => r?.step).filter((s) => Number.isFinite(s));
    replaceChildren(
      this.header,
      el(
        "div",
        { class: "title-row" },
        el("h1", { testid: "run-name" }, run.name || "(unnamed run)"),
        kindBadge(run.kind),
        statusBadge(status),
        live
          ? el("span", { class: "live", testid: "live-indicator" }, `live · refreshing every ${REFRESH_MS / 1000} s`)
          : null,
      ),
      el("div", { class: "run-id" }, "id ", el("code", { testid: "run-id" }, run.id ?? this.id)),
      run.error_message ? el("pre", { class: "error-message", testid: "run-error" }, run.error_message) : null,
      el(
        "dl",
        { class: "facts" },
        fact("model", run.model ?? "—", "run-model"),
        fact("environments", names(run), "run-environments"),
        fact("framework", run.framework ?? "—", "run-framework"),
        fact("tags", tags(run), "run-tags"),
        fact("created", fmtTime(run.created_at), "run-created"),
        fact(live ? "running for" : "duration", fmtDuration(runDuration(run)), "run-duration"),
        train
          ? fact(
              "steps logged",
              steps.length ? `${fmtCount(steps.length)} (last ${Math.max(...steps)})` : "0",
              "run-steps",
            )
          : fact("samples", fmtCount(run.num_samples), "run-num-samples"),
        train
          ? fact(
              "sample rows (Parquet)",
              fmtCount(objects.reduce((sum, o) => sum + (Number(o.rows) || 0), 0)),
              "run-sample-rows",
            )
          : null,
        fact("episodes", fmtCount(run.num_episodes), "run-num-episodes"),
        fact("traces", fmtCount(run.num_traces), "run-num-traces"),
        run.team_id ? fact("team", run.team_id, "run-team") : null,
        run.hosted ? fact("hosted", "yes", "run-hosted") : null,
        this.details(run),
      ),
    );
  }

  // Creation facts the server keeps beside the config (dataset, max_steps, batch_size, ...).
  details(run) {
    const details = run.details && typeof run.details === "object" ? run.details : {};
    return Object.entries(details)
      .filter(([, value]) => value !== null && value !== undefined && value !== "" && typeof value !== "object")
      .map(([name, value]) => fact(name.replaceAll("_", " "), String(value), `run-detail-${name}`));
  }

  schedule(run) {
    clearTimeout(this.timer);
    if (!ACTIVE_STATUSES.has(normalStatus(run.status))) return;
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  async refresh() {
    let run;
    let stats;
    try {
      [run, stats] = await Promise.all([this.api.run(this.id), this.loadStats()]);
    } catch (error) {
      if (this.disposed) return;
      if (error instanceof UnauthorizedError) {
        this.onUnauthorized(error);
        return;
      }
      this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
      return;
    }
    if (this.disposed) return;
    this.run = run;
    this.stats = stats ?? this.stats;
    this.renderHeader(run);
    await this.tab?.refresh?.(run, this.stats);
    if (!this.disposed) this.schedule(run);
  }
}
