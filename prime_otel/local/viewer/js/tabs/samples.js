// Samples tab: the evaluation's v0 sample rows, sortable by reward and filtered by outcome and environment.
import { el, fmtNumber, runHref, truncate } from "../dom.js";
import { lastOfRole, messagePreview, promptAndCompletion } from "../messages.js";
import { sampleView } from "../record.js";
import { filterBar, PagedTable } from "../table.js";
import { errorText } from "../transcript.js";

export function outcomeBadge(ok) {
  return ok
    ? el("span", { class: "badge tone-ok", testid: "row-outcome" }, "ok")
    : el("span", { class: "badge tone-error", testid: "row-outcome" }, "error");
}

function environmentOptions(environments) {
  return [["", "All environments"], ...environments.map((e) => [e.id, `${e.name} (${e.count})`])];
}

const OUTCOME_OPTIONS = [
  ["", "Any outcome"],
  ["ok", "OK only"],
  ["error", "Errors only"],
];

// The filters the samples and episodes tables share: by outcome, and by environment where there are several.
export function outcomeAndEnvironmentFilters(environments, table) {
  return filterBar(
    [
      { name: "outcome", label: "Outcome", options: OUTCOME_OPTIONS, testid: "filter-outcome" },
      environments.length > 1
        ? {
            name: "environment",
            label: "Environment",
            options: environmentOptions(environments),
            testid: "filter-environment",
          }
        : null,
    ].filter(Boolean),
    (filters) => table.setFilters(filters),
  );
}

function sampleEnvironment(sample) {
  return sample?.info?.native_wrapper?.env?.id ?? null;
}

export class SamplesTab {
  constructor(api, run, stats) {
    const environments = stats?.samples?.environments ?? [];
    const names = new Map(environments.map((e) => [e.id, e.name]));
    this.table = new PagedTable({
      testid: "samples-table",
      rowTestid: "sample-row",
      emptyText: "No samples match.",
      fetchPage: (offset, limit, query) => api.samples(run.id, offset, limit, query),
      detail: (s) =>
        sampleView(s, {
          episodeHref: s.episode_id && run.num_episodes ? runHref(run.id, "episodes", s.episode_id) : null,
        }),
      columns: [
        { key: "example_id", label: "example", numeric: true, cell: (s) => fmtNumber(s.example_id) },
        { key: "rollout_number", label: "rollout", numeric: true, cell: (s) => fmtNumber(s.rollout_number) },
        { key: "reward", label: "reward", numeric: true, sort: "reward", cell: (s) => fmtNumber(s.reward) },
        { key: "outcome", label: "outcome", cell: (s) => outcomeBadge(!s.error && s.is_completed !== false) },
        { key: "stop_condition", label: "stop condition", cell: (s) => s.stop_condition ?? "—" },
        {
          key: "environment",
          label: "environment",
          cell: (s) => names.get(sampleEnvironment(s)) ?? sampleEnvironment(s) ?? "—",
        },
        {
          key: "completion",
          label: "completion",
          cell: (s) => {
            const { completion } = promptAndCompletion(s);
            const reply = lastOfRole(completion, "assistant") ?? completion[completion.length - 1];
            return [
              el("span", { class: "preview" }, truncate(messagePreview(reply), 90)),
              s.error
                ? el("span", { class: "preview-error", testid: "sample-error" }, truncate(errorText(s.error), 90))
                : null,
            ];
          },
        },
      ],
    });
    this.filters = outcomeAndEnvironmentFilters(environments, this.table);
  }

  async mount(panel) {
    panel.append(this.filters, this.table.element);
    await this.table.load(0);
  }

  refresh() {
    return this.table.refresh();
  }
}
