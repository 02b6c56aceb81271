// Episodes tab: episode records uploaded to Prime Traces, each opening to its conversations.
import { el, fmtCount, fmtNumber, isObject, notice, runHref, truncate } from "../dom.js";
import { conversationOf, messagePreview } from "../messages.js";
import { episodeView } from "../record.js";
import { PagedTable } from "../table.js";
import { outcomeAndEnvironmentFilters, outcomeBadge } from "./samples.js";

function membersOf(record) {
  return Array.isArray(record?.traces) ? record.traces.filter(isObject) : [record];
}

// The summary trace is the first trainable one, else the first; its reward is the weighted sum
// of the rewards that were scored (0 when none were).
function summaryTrace(record) {
  const traces = membersOf(record);
  return traces.find((t) => t.agent?.trainable !== false) ?? traces[0] ?? null;
}

function summaryReward(record) {
  const trace = summaryTrace(record);
  if (!trace) return null;
  if (typeof trace.reward === "number") return trace.reward;
  if (!isObject(trace.rewards)) return null;
  let total = 0;
  for (const reward of Object.values(trace.rewards)) {
    if (isObject(reward) && Number.isFinite(Number(reward.score)))
      total += Number(reward.score) * Number(reward.weight ?? 1);
  }
  return total;
}

function failed(record) {
  if (record?.ok === false) return true;
  const errors = (r) => Array.isArray(r?.errors) && r.errors.length > 0;
  return errors(record) || membersOf(record).some((t) => t.ok === false || errors(t));
}

function taskPreview(record) {
  const messages = conversationOf(summaryTrace(record)).branches[0]?.messages ?? [];
  const user = messages.find((m) => m.role === "user");
  return truncate(messagePreview(user) || "", 80);
}

function traceCount(record) {
  if (Array.isArray(record?.traces)) return record.traces.length;
  if (Array.isArray(record?.trace_ids)) return record.trace_ids.length;
  return 1;
}

export class EpisodesTab {
  constructor(api, run, stats, route) {
    this.api = api;
    this.run = run;
    this.item = route?.item ?? null;
    const environments = stats?.episodes?.environments ?? [];
    const names = new Map(environments.map((e) => [e.id, e.name]));
    const envId = (e) => e.env?.id ?? e.environment_id ?? null;
    this.table = new PagedTable({
      testid: "episodes-table",
      rowTestid: "episode-row",
      emptyText: "No episodes match.",
      fetchPage: (offset, limit, query) => api.episodes(run.id, offset, limit, query),
      detail: (e) => episodeView(e),
      columns: [
        {
          key: "id",
          label: "episode",
          cell: (e) => el("code", { title: String(e.id ?? "") }, truncate(e.id ?? "—", 14)),
        },
        { key: "env", label: "environment", cell: (e) => names.get(envId(e)) ?? envId(e) ?? "—" },
        run.kind === "train"
          ? { key: "step", label: "step", numeric: true, cell: (e) => fmtNumber(e.run?.work?.step) }
          : null,
        { key: "task", label: "task", cell: (e) => el("span", { class: "preview" }, taskPreview(e)) },
        { key: "ok", label: "outcome", cell: (e) => outcomeBadge(!failed(e)) },
        { key: "traces", label: "traces", numeric: true, cell: (e) => fmtNumber(traceCount(e)) },
        {
          key: "tokens",
          label: "tokens",
          numeric: true,
          cell: (e) => (e.num_total_tokens === undefined ? "—" : fmtCount(e.num_total_tokens)),
        },
        { key: "reward", label: "reward", numeric: true, sort: "reward", cell: (e) => fmtNumber(summaryReward(e)) },
      ].filter(Boolean),
    });
    this.filters = outcomeAndEnvironmentFilters(environments, this.table);
  }

  async mount(panel) {
    if (this.item) {
      await this.mountOne(panel);
      return;
    }
    panel.append(this.filters, this.table.element);
    await this.table.load(0);
  }

  async mountOne(panel) {
    panel.append(
      el("a", { href: runHref(this.run.id, "episodes"), class: "back", testid: "back-to-episodes" }, "← All episodes"),
    );
    let record;
    try {
      record = await this.api.episode(this.run.id, this.item);
    } catch (error) {
      panel.append(notice(`Could not load episode ${this.item}: ${error.message}`, "error", "error"));
      return;
    }
    panel.append(el("h3", {}, `Episode ${this.item}`), episodeView(record));
  }

  refresh() {
    return this.item ? null : this.table.refresh();
  }
}
