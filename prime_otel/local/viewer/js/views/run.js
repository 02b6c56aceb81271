// One run: header (refreshed while the run is active) and a tab per kind of data.
import { ApiError, UnauthorizedError } from "../api.js";
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
} from "../dom.js";
import { ConfigTab } from "../tabs/config.js";
import { EpisodesTab } from "../tabs/episodes.js";
import { MetricsTab } from "../tabs/metrics.js";
import { SamplesTab } from "../tabs/samples.js";
import { StepsTab } from "../tabs/steps.js";
import { SummaryTab } from "../tabs/summary.js";

const REFRESH_MS = 3000;

const TABS = {
  samples: { label: "Samples", make: (api, run) => new SamplesTab(api, run) },
  episodes: { label: "Episodes", make: (api, run) => new EpisodesTab(api, run) },
  metrics: { label: "Metrics", make: (api, run) => new MetricsTab(run) },
  steps: { label: "Steps", make: (api, run) => new StepsTab(api, run) },
  config: { label: "Config", make: (api, run) => new ConfigTab(run) },
  summary: { label: "Summary / Requests", make: (api, run) => new SummaryTab(run) },
};

function tabsFor(kind) {
  return kind === "train"
    ? ["metrics", "steps", "episodes", "config", "summary"]
    : ["samples", "episodes", "config", "summary"];
}

function list(value) {
  if (!Array.isArray(value) || value.length === 0) return "—";
  return value.map((v) => (v && typeof v === "object" ? (v.name ?? v.id ?? JSON.stringify(v)) : String(v))).join(", ");
}

function fact(label, value, testid) {
  return el("div", {}, el("dt", {}, label), el("dd", { testid }, value));
}

export class RunView {
  constructor(api, route, onUnauthorized) {
    this.api = api;
    this.id = route.id;
    this.requestedTab = route.tab;
    this.onUnauthorized = onUnauthorized;
    this.disposed = false;
    this.timer = null;
    this.header = el("section", { class: "run-head", testid: "run-header" });
    this.tabBar = el("nav", { class: "tabs", role: "tablist" });
    this.panel = el("section", { class: "tab-panel", role: "tabpanel", testid: "tab-panel" });
  }

  async mount(root) {
    root.append(el("a", { class: "back", href: "#/runs", testid: "back-to-runs" }, "← All runs"), this.header);
    let run;
    try {
      run = await this.api.run(this.id);
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
    const names = tabsFor(run.kind);
    const first = names.includes(this.requestedTab) ? this.requestedTab : names[0];
    replaceChildren(
      this.tabBar,
      names.map((name) =>
        el(
          "button",
          {
            type: "button",
            role: "tab",
            "data-tab": name,
            testid: `tab-${name}`,
            onclick: () => this.select(name, true),
          },
          TABS[name].label,
        ),
      ),
    );
    root.append(this.tabBar, this.panel);
    this.scheduleIfActive(run);
    await this.select(first, false);
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
  }

  async select(name, remember) {
    for (const button of this.tabBar.querySelectorAll("button")) {
      const selected = button.dataset.tab === name;
      button.setAttribute("aria-selected", String(selected));
      button.classList.toggle("selected", selected);
    }
    if (remember)
      window.history.replaceState(
        null,
        "",
        `${window.location.pathname}${window.location.search}${runHref(this.id, name)}`,
      );
    const panel = el("div", { testid: `panel-${name}` });
    replaceChildren(this.panel, panel);
    try {
      await TABS[name].make(this.api, this.run).mount(panel);
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
    replaceChildren(
      this.header,
      el(
        "div",
        { class: "title-row" },
        el("h1", { testid: "run-name" }, run.name || "(unnamed run)"),
        kindBadge(run.kind),
        statusBadge(status),
      ),
      el("div", { class: "run-id" }, "id ", el("code", { testid: "run-id" }, run.id ?? this.id)),
      run.error_message ? el("pre", { class: "error-message", testid: "run-error" }, run.error_message) : null,
      el(
        "dl",
        { class: "facts" },
        fact("model", run.model ?? "—", "run-model"),
        fact("framework", run.framework ?? "—", "run-framework"),
        fact("tags", list(run.tags), "run-tags"),
        fact("environments", list(run.environments), "run-environments"),
        fact("created", fmtTime(run.created_at), "run-created"),
        fact("updated", fmtTime(run.updated_at), "run-updated"),
        fact("samples", fmtNumber(run.num_samples), "run-num-samples"),
        fact("episodes", fmtNumber(run.num_episodes), "run-num-episodes"),
        fact("traces", fmtNumber(run.num_traces), "run-num-traces"),
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

  scheduleIfActive(run) {
    if (!ACTIVE_STATUSES.has(normalStatus(run.status))) return;
    this.timer = setTimeout(() => this.refreshHeader(), REFRESH_MS);
  }

  async refreshHeader() {
    let run;
    try {
      run = await this.api.run(this.id);
    } catch (error) {
      if (this.disposed) return;
      if (error instanceof UnauthorizedError) {
        this.onUnauthorized(error);
        return;
      }
      this.timer = setTimeout(() => this.refreshHeader(), REFRESH_MS);
      return;
    }
    if (this.disposed) return;
    this.run = run;
    this.renderHeader(run);
    this.scheduleIfActive(run);
  }
}
