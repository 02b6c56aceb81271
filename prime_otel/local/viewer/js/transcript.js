// A conversation drawn as a chat transcript: one bubble per message, reasoning folded, tool calls
// with their arguments, tool results, and the model call that produced each reply.
import { el, fmtCount, fmtDuration, isObject, truncate } from "./dom.js";

const ROLE_LABELS = { system: "System", user: "User", assistant: "Assistant", tool: "Tool result" };

export function errorText(error) {
  if (!error) return null;
  if (typeof error === "string") return error;
  if (!isObject(error)) return String(error);
  const head = [error.type, error.status_code ? `(${error.status_code})` : null].filter(Boolean).join(" ");
  return [head, error.message].filter(Boolean).join(": ") || JSON.stringify(error);
}

function callSeconds(call) {
  const start = Number(call?.time?.start);
  const end = Number(call?.time?.end);
  return Number.isFinite(start) && Number.isFinite(end) && end >= start ? end - start : null;
}

function usageText(usage) {
  if (!isObject(usage)) return null;
  const parts = [];
  if (usage.prompt_tokens !== undefined) parts.push(`${fmtCount(usage.prompt_tokens)} in`);
  if (usage.completion_tokens !== undefined) parts.push(`${fmtCount(usage.completion_tokens)} out`);
  if (usage.cached_input_tokens) parts.push(`${fmtCount(usage.cached_input_tokens)} cached`);
  if (usage.reasoning_tokens) parts.push(`${fmtCount(usage.reasoning_tokens)} reasoning`);
  if (usage.cost) parts.push(`$${Number(usage.cost).toPrecision(2)}`);
  return parts.length ? parts.join(" · ") : null;
}

// "Qwen/Qwen3-8B · 96 in · 141 out · 3.4 s · stop"
export function callSummary(call) {
  const seconds = callSeconds(call);
  return [
    call.model ?? null,
    usageText(call.usage),
    seconds === null ? null : fmtDuration(seconds),
    call.finish_reason ? `finish: ${call.finish_reason}` : null,
  ]
    .filter(Boolean)
    .join(" · ");
}

function textBlock(text, testid = "message-text") {
  return el("div", { class: "msg-text", testid }, text);
}

function toolCallBlock(call) {
  return el(
    "div",
    { class: "tool-call", testid: "tool-call", "data-tool": call.name },
    el(
      "div",
      { class: "tool-call-head" },
      el("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
      " Tool call ",
      el("strong", { testid: "tool-call-name" }, call.name),
      call.id ? el("code", { class: "muted" }, ` ${call.id}`) : null,
    ),
    el("pre", { class: "tool-args", testid: "tool-call-arguments" }, call.arguments),
  );
}

function messageItem(message) {
  const role = message.role;
  const label = ROLE_LABELS[role] ?? role;
  const head = el(
    "div",
    { class: "msg-head" },
    el("span", { class: "msg-role" }, label),
    role === "tool" && (message.name || message.toolCallId)
      ? el("span", { class: "muted" }, [message.name, message.toolCallId].filter(Boolean).join(" · "))
      : null,
    role !== "tool" && message.name ? el("span", { class: "muted" }, message.name) : null,
  );
  const error = message.call?.error ? errorText(message.call.error) : null;
  return el(
    "li",
    { class: `msg msg-${ROLE_LABELS[role] ? role : "other"}`, testid: "message", "data-role": role },
    head,
    message.reasoning
      ? el(
          "details",
          { class: "reasoning", testid: "reasoning" },
          el("summary", {}, `Reasoning (${fmtCount(message.reasoning.length)} characters)`),
          textBlock(message.reasoning, "reasoning-text"),
        )
      : null,
    message.text
      ? role === "tool"
        ? el("pre", { class: "tool-result", testid: "message-text" }, message.text)
        : textBlock(message.text)
      : null,
    !message.text && role === "tool" ? el("div", { class: "muted", testid: "message-text" }, "(empty result)") : null,
    message.images?.length
      ? el("div", { class: "muted" }, message.images.map((url) => `[image ${truncate(url, 60)}]`).join(" "))
      : null,
    message.toolCalls.map(toolCallBlock),
    message.call ? el("div", { class: "call-meta", testid: "call-meta" }, callSummary(message.call)) : null,
    error ? el("div", { class: "call-error", testid: "call-error" }, error) : null,
  );
}

function failedCallItem(call) {
  return el(
    "li",
    { class: "msg msg-failed", testid: "failed-call", "data-role": "error" },
    el("div", { class: "msg-head" }, el("span", { class: "msg-role" }, "Model call failed")),
    el("div", { class: "call-error" }, errorText(call.error) ?? "no reply"),
    el("div", { class: "call-meta" }, callSummary(call)),
  );
}

export function transcript(messages, { failedCalls = [], testid = "transcript", label = null } = {}) {
  return el(
    "ol",
    { class: "transcript", testid, "aria-label": label ?? "Conversation" },
    messages.map(messageItem),
    failedCalls.map(failedCallItem),
  );
}

// Every model exchange of a trace, failed ones included.
export function callsTable(calls) {
  const rows = calls.filter(isObject).map((call, index) => {
    const usage = isObject(call.usage) ? call.usage : {};
    const seconds = callSeconds(call);
    return el(
      "tr",
      { testid: "call-row", class: call.error ? "row-error" : null },
      el("td", { class: "num" }, String(index + 1)),
      el("td", {}, call.model ?? "—"),
      el("td", { class: "num" }, fmtCount(usage.prompt_tokens)),
      el("td", { class: "num" }, fmtCount(usage.completion_tokens)),
      el("td", { class: "num" }, usage.cached_input_tokens ? fmtCount(usage.cached_input_tokens) : "—"),
      el("td", { class: "num" }, seconds === null ? "—" : fmtDuration(seconds)),
      el(
        "td",
        {},
        call.error ? el("span", { class: "text-error" }, errorText(call.error)) : (call.finish_reason ?? "—"),
      ),
    );
  });
  return el(
    "div",
    { class: "table-wrap" },
    el(
      "table",
      { class: "data compact", testid: "calls-table" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["#", "model", "in", "out", "cached", "time", "finish"].map((h, i) =>
            el("th", { class: [0, 2, 3, 4, 5].includes(i) ? "num" : null }, h),
          ),
        ),
      ),
      el("tbody", {}, rows),
    ),
  );
}
