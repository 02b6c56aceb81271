// Samples tab: the evaluation's v0 sample rows.
import { el, fmtBool, fmtNumber, truncate } from "../dom.js";
import { PagedTable } from "../table.js";

function messageText(message) {
  const content = message?.content;
  if (typeof content === "string" && content.trim()) return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join(" ");
  const calls = Array.isArray(message?.tool_calls) ? message.tool_calls : [];
  return calls
    .map(
      (call) =>
        `${call?.name ?? call?.function?.name ?? "tool"}(${call?.arguments ?? call?.function?.arguments ?? ""})`,
    )
    .join(" ");
}

function errorText(error) {
  if (!error) return null;
  if (typeof error === "string") return error;
  return [error.type, error.message].filter(Boolean).join(": ") || null;
}

function completionPreview(completion) {
  if (typeof completion === "string") return truncate(completion, 90);
  if (!Array.isArray(completion)) return "";
  const replies = completion.filter((m) => m?.role === "assistant");
  const last = replies.length ? replies[replies.length - 1] : completion[completion.length - 1];
  return truncate(messageText(last), 90);
}

export class SamplesTab {
  constructor(api, run) {
    this.table = new PagedTable({
      testid: "samples-table",
      rowTestid: "sample-row",
      emptyText: "No samples were pushed to this run.",
      fetchPage: (offset, limit) => api.samples(run.id, offset, limit),
      columns: [
        { key: "example_id", label: "example", numeric: true, cell: (s) => fmtNumber(s.example_id) },
        { key: "rollout_number", label: "rollout", numeric: true, cell: (s) => fmtNumber(s.rollout_number) },
        { key: "reward", label: "reward", numeric: true, cell: (s) => fmtNumber(s.reward) },
        { key: "is_completed", label: "completed", cell: (s) => fmtBool(s.is_completed) },
        { key: "stop_condition", label: "stop condition", cell: (s) => s.stop_condition ?? "—" },
        { key: "agent", label: "agent", cell: (s) => s.agent ?? "—" },
        {
          key: "completion",
          label: "completion",
          cell: (s) => [
            el("span", { class: "preview" }, completionPreview(s.completion)),
            errorText(s.error)
              ? el("span", { class: "preview-error", testid: "sample-error" }, truncate(errorText(s.error), 90))
              : null,
          ],
        },
      ],
    });
  }

  async mount(panel) {
    panel.append(this.table.element);
    await this.table.load(0);
  }
}
