// Episodes tab: episode records uploaded to the traces endpoint.
import { el, fmtBool, fmtNumber, truncate } from "../dom.js";
import { PagedTable } from "../table.js";

// The summary trace is the first trainable one, else the first; its reward is
// the weighted sum of the rewards that were scored (0 when none were).
function summaryReward(episode) {
  const traces = Array.isArray(episode?.traces) ? episode.traces.filter((t) => t && typeof t === "object") : [];
  if (traces.length === 0) return null;
  const summary = traces.find((t) => t.agent?.trainable) ?? traces[0];
  let total = 0;
  for (const reward of Object.values(summary.rewards ?? {})) {
    if (reward && Number.isFinite(Number(reward.score))) total += Number(reward.score) * Number(reward.weight ?? 1);
  }
  return total;
}

function traceCount(episode) {
  if (Array.isArray(episode?.traces)) return episode.traces.length;
  if (Array.isArray(episode?.trace_ids)) return episode.trace_ids.length;
  return null;
}

export class EpisodesTab {
  constructor(api, run) {
    this.table = new PagedTable({
      testid: "episodes-table",
      rowTestid: "episode-row",
      emptyText: "No episodes were uploaded for this run.",
      fetchPage: (offset, limit) => api.episodes(run.id, offset, limit),
      columns: [
        {
          key: "id",
          label: "episode",
          cell: (e) => el("code", { title: String(e.id ?? "") }, truncate(e.id ?? "—", 40)),
        },
        { key: "env", label: "environment", cell: (e) => e.env?.id ?? e.environment_id ?? "—" },
        { key: "ok", label: "ok", cell: (e) => fmtBool(e.ok) },
        { key: "traces", label: "traces", numeric: true, cell: (e) => fmtNumber(traceCount(e)) },
        { key: "reward", label: "reward", numeric: true, cell: (e) => fmtNumber(summaryReward(e)) },
      ],
    });
  }

  async mount(panel) {
    panel.append(this.table.element);
    await this.table.load(0);
  }
}
