// What an expanded row shows: the conversation, with rewards, metrics, usage and timing beside it,
// errors on top, and the stored record as JSON one click away.
import { el, fmtCount, fmtDuration, fmtJson, fmtNumber, isObject, parsedJson, revealer } from "./dom.js";
import { conversationOf, promptAndCompletion, splitPrompt } from "./messages.js";
import { callsTable, errorText, transcript } from "./transcript.js";

function kvTable(title, entries, testid) {
  if (!entries.length) return null;
  return el(
    "section",
    { class: "side-block", testid },
    el("h4", {}, title),
    el(
      "table",
      { class: "kv" },
      el(
        "tbody",
        {},
        entries.map(([name, value, tone]) =>
          el(
            "tr",
            { testid: `${testid}-row`, "data-name": name },
            el("th", { scope: "row" }, name),
            el("td", { class: tone ? `num text-${tone}` : "num" }, value),
          ),
        ),
      ),
    ),
  );
}

function scalarEntries(object) {
  if (!isObject(object)) return [];
  return Object.entries(object)
    .filter(([, v]) => v === null || ["number", "string", "boolean"].includes(typeof v))
    .map(([name, v]) => [name, typeof v === "number" ? fmtNumber(v) : v === null ? "—" : String(v)]);
}

function rewardEntries(rewards) {
  if (!isObject(rewards)) return [];
  return Object.entries(rewards).map(([name, r]) => {
    if (!isObject(r)) return [name, "not scored", "muted"];
    const weight = r.weight !== undefined && Number(r.weight) !== 1 ? ` × ${fmtNumber(r.weight)}` : "";
    return [name, `${fmtNumber(r.score)}${weight}`];
  });
}

function span(stage) {
  const start = Number(stage?.start);
  const end = Number(stage?.end);
  return Number.isFinite(start) && Number.isFinite(end) && end > start ? end - start : null;
}

function timingEntries(timing) {
  if (!isObject(timing)) return [];
  const entries = [];
  let first = Number.isFinite(Number(timing.start)) ? Number(timing.start) : Infinity;
  let last = -Infinity;
  for (const [name, stage] of Object.entries(timing)) {
    const seconds = span(stage);
    if (seconds === null) continue;
    first = Math.min(first, Number(stage.start));
    last = Math.max(last, Number(stage.end));
    entries.push([name, fmtDuration(seconds)]);
    if (isObject(stage.model) && Number.isFinite(Number(stage.model.duration))) {
      entries.push([`${name} · model`, fmtDuration(stage.model.duration)]);
    }
  }
  if (Number.isFinite(first) && last > first) entries.unshift(["total", fmtDuration(last - first)]);
  return entries;
}

// An OpenTelemetry GenAI attribute, on the record itself or under `attributes`.
function genAi(record, name) {
  return record[name] ?? (isObject(record.attributes) ? record.attributes[name] : undefined);
}

function usageEntries(record, calls) {
  const entries = [];
  const input = record.num_input_tokens ?? genAi(record, "gen_ai.usage.input_tokens");
  const output = record.num_output_tokens ?? genAi(record, "gen_ai.usage.output_tokens");
  if (input !== undefined) entries.push(["input tokens", fmtCount(input)]);
  if (output !== undefined) entries.push(["output tokens", fmtCount(output)]);
  const usage = isObject(record.token_usage) ? record.token_usage : null;
  if (usage)
    for (const [name, value] of Object.entries(usage)) entries.push([name.replaceAll("_", " "), fmtCount(value)]);
  if (calls.length) entries.push(["model calls", fmtCount(calls.length)]);
  const cost = calls.reduce((sum, c) => sum + (Number(c?.usage?.cost) || 0), 0);
  if (cost > 0) entries.push(["cost", `$${cost.toPrecision(3)}`]);
  return entries;
}

function errorsBox(errors) {
  const list = (Array.isArray(errors) ? errors : [errors]).filter(Boolean);
  if (!list.length) return null;
  return el(
    "div",
    { class: "errors-box", role: "alert", testid: "record-errors" },
    el("strong", {}, list.length === 1 ? "Error" : `${list.length} errors`),
    el(
      "ul",
      {},
      list.map((e) => el("li", { testid: "record-error" }, errorText(e))),
    ),
  );
}

function badge(text, tone, testid) {
  return el("span", { class: `badge tone-${tone}`, testid }, text);
}

function okBadge(ok) {
  if (ok === true) return badge("ok", "ok", "record-ok");
  if (ok === false) return badge("error", "error", "record-ok");
  return null;
}

function conversationBlock(trace) {
  const { branches } = conversationOf(trace);
  if (!branches.length) return el("p", { class: "muted" }, "No messages in this record.");
  if (branches.length === 1) return transcript(branches[0].messages, { failedCalls: branches[0].failedCalls });
  // A rewritten history forks the graph: one transcript per root-to-leaf branch, the last open.
  return el(
    "div",
    { class: "branches" },
    branches.map((branch, i) =>
      el(
        "details",
        { class: "branch", open: i === branches.length - 1 },
        el("summary", {}, `Branch ${i + 1} of ${branches.length} · ${branch.messages.length} messages`),
        transcript(branch.messages, { failedCalls: i === branches.length - 1 ? branch.failedCalls : [] }),
      ),
    ),
  );
}

function traceReward(trace) {
  if (Number.isFinite(Number(trace.reward)) && trace.reward !== null) return Number(trace.reward);
  if (!isObject(trace.rewards)) return null;
  let total = 0;
  for (const r of Object.values(trace.rewards)) {
    if (isObject(r) && Number.isFinite(Number(r.score))) total += Number(r.score) * Number(r.weight ?? 1);
  }
  return total;
}

function layout(main, side) {
  if (!side.some(Boolean)) return el("div", { class: "record-main" }, main);
  return el(
    "div",
    { class: "record-layout" },
    el("div", { class: "record-main" }, main),
    el("aside", { class: "record-side", "aria-label": "Scores and usage" }, side),
  );
}

export function traceView(trace, { heading = true } = {}) {
  if (!isObject(trace)) return el("p", { class: "muted" }, `Trace ${String(trace)} is not stored inline.`);
  const agent = isObject(trace.agent) ? trace.agent : {};
  const calls = Array.isArray(trace.calls) ? trace.calls.filter(isObject) : [];
  const reward = traceReward(trace);
  const model =
    agent.config?.model ??
    calls.find((c) => c.model)?.model ??
    genAi(trace, "gen_ai.response.model") ??
    genAi(trace, "gen_ai.request.model") ??
    null;
  const head = heading
    ? el(
        "header",
        { class: "trace-head" },
        el("h4", { testid: "trace-agent" }, agent.name ?? trace.name ?? "trace"),
        agent.trainable === false ? badge("not trainable", "muted", "trace-trainable") : null,
        okBadge(trace.ok),
        model ? el("span", { class: "muted" }, model) : null,
        trace.stop_condition
          ? el("span", { class: "muted", testid: "trace-stop" }, `stop: ${trace.stop_condition}`)
          : null,
        reward === null
          ? null
          : el("span", { class: "trace-reward", testid: "trace-reward" }, `reward ${fmtNumber(reward)}`),
      )
    : null;
  const info = isObject(trace.info) ? scalarEntries(trace.info) : [];
  const side = [
    kvTable("Rewards", rewardEntries(trace.rewards), "trace-rewards"),
    kvTable("Metrics", scalarEntries(trace.metrics), "trace-metrics"),
    kvTable("Info", info, "trace-info"),
    kvTable("Usage", usageEntries(trace, calls), "trace-usage"),
    kvTable("Timing", timingEntries(trace.timing), "trace-timing"),
  ];
  return el(
    "article",
    {
      class: `trace${trace.ok === false ? " trace-failed" : ""}`,
      testid: "trace-view",
      "data-trace-id": trace.id ?? "",
    },
    head,
    errorsBox(trace.errors),
    layout(
      [
        conversationBlock(trace),
        calls.length
          ? el(
              "details",
              { class: "more calls" },
              el("summary", {}, `Model calls (${calls.length})`),
              callsTable(calls),
            )
          : null,
      ],
      side,
    ),
  );
}

function rawJson(value, testid) {
  return revealer("Raw JSON", () => el("pre", { class: "json", testid }, fmtJson(value)), `${testid}-toggle`);
}

// An episode envelope (member traces inline) or a bare trace.
export function episodeView(record, { jsonTestid = "episode-json" } = {}) {
  if (!isObject(record)) return el("pre", { class: "json" }, fmtJson(record));
  const traces = Array.isArray(record.traces) ? record.traces : null;
  const env = record.env?.name ?? record.env?.id ?? null;
  const work = record.run?.work;
  const facts = [
    env ? ["environment", env] : null,
    Number.isInteger(work?.step) ? ["step", String(work.step)] : null,
    record.group?.id ? ["group", record.group.id] : null,
    record.num_input_tokens !== undefined
      ? ["tokens", `${fmtCount(record.num_input_tokens)} in · ${fmtCount(record.num_output_tokens)} out`]
      : null,
    record.is_timeout ? ["timed out", "yes"] : null,
  ].filter(Boolean);
  const json = rawJson(record, jsonTestid);
  return el(
    "section",
    { class: "episode", testid: "episode-view" },
    el(
      "div",
      { class: "episode-head" },
      okBadge(record.ok),
      facts.map(([name, value]) => el("span", { class: "fact" }, el("span", { class: "muted" }, `${name} `), value)),
      el("span", { class: "spacer" }),
      json[0],
    ),
    json[1],
    errorsBox(record.errors),
    traces ? traces.map((trace) => traceView(trace)) : traceView(record),
  );
}

function v0Rewards(row) {
  const known = new Set(["reward", "example_id", "rollout_number", "sample_id", "episode_id"]);
  return Object.entries(row)
    .filter(([name, v]) => typeof v === "number" && !known.has(name))
    .map(([name, v]) => [name, fmtNumber(v)]);
}

function promptCompletion(split) {
  return [
    el("h4", { class: "section-label" }, "Prompt"),
    split.prompt.length
      ? transcript(split.prompt, { testid: "prompt-transcript", label: "Prompt" })
      : el("p", { class: "muted" }, "(empty)"),
    el("h4", { class: "section-label" }, "Completion"),
    split.completion.length
      ? transcript(split.completion, { testid: "completion-transcript", label: "Completion" })
      : el("p", { class: "muted" }, "(empty)"),
  ];
}

// A legacy v0 evaluation sample row.
export function sampleView(row, { episodeHref = null, jsonTestid = "sample-row-json" } = {}) {
  if (!isObject(row)) return el("pre", { class: "json" }, fmtJson(row));
  const split = promptAndCompletion(row);
  const json = rawJson(row, jsonTestid);
  const side = [
    kvTable("Reward", [["reward", fmtNumber(row.reward)], ...v0Rewards(row)], "sample-rewards"),
    kvTable("Metrics", scalarEntries(row.metrics), "sample-metrics"),
    kvTable(
      "Outcome",
      [
        ["stop", row.stop_condition ?? "—"],
        ["completed", row.is_completed === undefined ? "—" : row.is_completed ? "yes" : "no"],
        ["truncated", row.is_truncated ? "yes" : "no"],
        row.answer ? ["answer", String(row.answer)] : null,
      ].filter(Boolean),
      "sample-outcome",
    ),
    kvTable("Usage", usageEntries(row, []), "sample-usage"),
    kvTable("Timing", timingEntries(row.timing), "sample-timing"),
  ];
  return el(
    "section",
    { class: "episode", testid: "sample-view" },
    el(
      "div",
      { class: "episode-head" },
      row.agent ? el("span", { class: "fact" }, el("span", { class: "muted" }, "agent "), row.agent) : null,
      episodeHref ? el("a", { href: episodeHref, testid: "open-episode" }, "Open the episode →") : null,
      el("span", { class: "spacer" }),
      json[0],
    ),
    json[1],
    errorsBox(row.error),
    layout(promptCompletion(split), side),
  );
}

// A training Parquet row: nested columns are JSON text.
export function stepRowView(row, { jsonTestid = "step-row-json" } = {}) {
  const decoded = {};
  for (const [name, value] of Object.entries(row)) decoded[name] = parsedJson(value);
  const json = rawJson(decoded, jsonTestid);
  const trajectory = Array.isArray(decoded.trajectory) ? decoded.trajectory : [];
  const completion = promptAndCompletion(decoded);
  const split =
    completion.prompt.length || completion.completion.length
      ? completion
      : splitPrompt(
          conversationOf({ messages: trajectory[trajectory.length - 1]?.messages ?? [] }).branches[0]?.messages ?? [],
        );
  const side = [
    kvTable(
      "Scores",
      [
        ["reward", fmtNumber(decoded.reward)],
        ["advantage", fmtNumber(decoded.advantage)],
      ],
      "step-row-scores",
    ),
    kvTable("Metrics", scalarEntries(decoded.metrics), "step-row-metrics"),
    kvTable(
      "Usage",
      [
        ["input tokens", fmtCount(decoded.num_input_tokens)],
        ["output tokens", fmtCount(decoded.num_output_tokens)],
      ],
      "step-row-usage",
    ),
    kvTable("Timing", timingEntries(decoded.timing), "step-row-timing"),
    isObject(decoded.task) && decoded.task.answer !== undefined
      ? kvTable("Task", [["answer", String(decoded.task.answer)]], "step-row-task")
      : null,
  ];
  return el(
    "section",
    { class: "episode", testid: "step-row-view" },
    el("div", { class: "episode-head" }, el("span", { class: "spacer" }), json[0]),
    json[1],
    layout(promptCompletion(split), side),
  );
}
