// Steps tab: the Parquet sample objects confirmed per training step and their decoded rows, each row
// read as prompt and completion the way the platform's training viewer shows it.
import { el, fmtBytes, fmtCount, fmtNumber, notice, replaceChildren, truncate } from "../dom.js";
import { lastOfRole, messagePreview, promptAndCompletion } from "../messages.js";
import { stepRowView } from "../record.js";
import { PagedTable, simpleTable } from "../table.js";

function preview(messages, role) {
  const message = lastOfRole(messages, role) ?? messages[messages.length - 1];
  return el("span", { class: "preview" }, truncate(messagePreview(message), 70));
}

class StepSection {
  constructor(api, runId, step, open) {
    this.objects = Array.isArray(step.objects) ? step.objects : [];
    this.rowsArea = el("div", { class: "step-rows" });
    this.table = new PagedTable({
      testid: "steps-table",
      rowTestid: "step-row",
      emptyText: "This step's objects hold no rows.",
      fetchPage: (offset, limit) => api.stepRows(runId, step.step, offset, limit),
      detail: (r) => stepRowView(r),
      columns: [
        { key: "sample_id", label: "sample", numeric: true, cell: (r) => fmtNumber(r.sample_id) },
        { key: "problem_id", label: "problem", numeric: true, cell: (r) => fmtNumber(r.problem_id) },
        { key: "env_name", label: "environment", cell: (r) => r.env_name || "—" },
        { key: "prompt", label: "prompt", cell: (r) => preview(promptAndCompletion(r).prompt, "user") },
        {
          key: "completion",
          label: "completion",
          cell: (r) => preview(promptAndCompletion(r).completion, "assistant"),
        },
        {
          key: "tokens",
          label: "tokens in / out",
          numeric: true,
          cell: (r) => `${fmtCount(r.num_input_tokens)} / ${fmtCount(r.num_output_tokens)}`,
        },
        { key: "reward", label: "reward", numeric: true, cell: (r) => fmtNumber(r.reward) },
        { key: "advantage", label: "advantage", numeric: true, cell: (r) => fmtNumber(r.advantage) },
      ],
    });
    this.loaded = false;
    const rows = step.num_rows ?? this.objects.reduce((sum, o) => sum + (Number(o.rows) || 0), 0);
    this.element = el(
      "details",
      { class: "step", testid: "step-section", "data-step": step.step, open, ontoggle: () => this.load() },
      el(
        "summary",
        {},
        el("strong", {}, `Step ${step.step}`),
        ` · ${fmtNumber(rows)} rows in ${this.objects.length} object${this.objects.length === 1 ? "" : "s"}`,
      ),
      simpleTable(
        "step-objects",
        [
          { key: "key", label: "object key", cell: (o) => el("code", {}, o.key ?? "—") },
          { key: "rows", label: "rows", numeric: true, cell: (o) => fmtNumber(o.rows) },
          {
            key: "bytes",
            label: "size",
            numeric: true,
            cell: (o) => el("span", { title: `${o.bytes} bytes` }, fmtBytes(o.bytes)),
          },
        ],
        this.objects,
        "step-object",
      ),
      this.rowsArea,
    );
  }

  async load() {
    if (!this.element.open || this.loaded) return;
    this.loaded = true;
    replaceChildren(this.rowsArea, this.table.element);
    try {
      await this.table.load(0);
    } catch (error) {
      this.loaded = false;
      replaceChildren(this.rowsArea, notice(`Could not load rows: ${error.message}`, "error", "error"));
    }
  }
}

export class StepsTab {
  constructor(api, run) {
    this.api = api;
    this.run = run;
  }

  async mount(panel) {
    const steps = (await this.api.steps(this.run.id)).filter((s) => s && typeof s === "object");
    if (steps.length === 0) {
      panel.append(notice("No Parquet sample objects were confirmed for this run.", "empty"));
      return;
    }
    steps.sort((a, b) => Number(a.step) - Number(b.step));
    const sections = steps.map((step, i) => new StepSection(this.api, this.run.id, step, i === 0));
    panel.append(
      el(
        "div",
        { class: "steps", testid: "steps-list" },
        sections.map((s) => s.element),
      ),
    );
    await sections[0].load();
  }
}
