// Conversations out of stored records, in one shape the transcript draws:
//   {role, text, images, reasoning, toolCalls: [{id, name, arguments}], toolCallId, name, call, sampled}
// Sources, first found wins: a verifiers message graph (trace.nodes), a chat `messages` list,
// `prompt` + `completion`, or OpenTelemetry GenAI attributes (gen_ai.input.messages / output.messages).
import { isObject, parsedJson } from "./dom.js";

function textOfParts(parts) {
  const texts = [];
  const images = [];
  for (const part of parts) {
    if (typeof part === "string") texts.push(part);
    else if (!isObject(part)) continue;
    else if (typeof part.text === "string") texts.push(part.text);
    else if (part.type === "image_url" || part.type === "image") {
      const url = part.image_url?.url ?? part.url ?? part.image ?? "";
      images.push(typeof url === "string" ? url : "");
    } else if (typeof part.content === "string") texts.push(part.content);
  }
  return { text: texts.join("\n"), images };
}

function contentOf(content) {
  if (content === null || content === undefined) return { text: "", images: [] };
  if (typeof content === "string") return { text: content, images: [] };
  if (Array.isArray(content)) return textOfParts(content);
  return { text: JSON.stringify(content, null, 2), images: [] };
}

function prettyArguments(value) {
  const parsed = parsedJson(value);
  if (typeof parsed === "string") return parsed;
  return JSON.stringify(parsed ?? {}, null, 2);
}

function toolCallOf(call) {
  if (!isObject(call)) return { id: null, name: "tool", arguments: String(call) };
  const fn = isObject(call.function) ? call.function : {};
  return {
    id: call.id ?? null,
    name: call.name ?? fn.name ?? "tool",
    arguments: prettyArguments(call.arguments ?? fn.arguments ?? call.args ?? call.input ?? ""),
  };
}

// A chat message (OpenAI / verifiers style).
export function chatMessage(message, extra = {}) {
  if (!isObject(message)) return { role: "unknown", ...contentOf(message), toolCalls: [], ...extra };
  const { text, images } = contentOf(message.content);
  const reasoning = message.reasoning_content ?? message.reasoning ?? message.thinking ?? null;
  return {
    role: String(message.role ?? "unknown"),
    text,
    images,
    reasoning: typeof reasoning === "string" && reasoning.trim() ? reasoning : null,
    toolCalls: Array.isArray(message.tool_calls) ? message.tool_calls.map(toolCallOf) : [],
    toolCallId: message.tool_call_id ?? null,
    name: message.name ?? null,
    ...extra,
  };
}

// An OpenTelemetry GenAI message: {role, parts: [{type: text|reasoning|tool_call|tool_call_response, ...}]}.
function genAiMessages(message) {
  if (!isObject(message)) return [];
  const parts = Array.isArray(message.parts) ? message.parts : [];
  const role = String(message.role ?? "unknown");
  const texts = [];
  const reasoning = [];
  const toolCalls = [];
  const results = [];
  for (const part of parts) {
    if (!isObject(part)) continue;
    const type = part.type;
    if (type === "text") texts.push(String(part.content ?? part.text ?? ""));
    else if (type === "reasoning") reasoning.push(String(part.content ?? ""));
    else if (type === "tool_call") toolCalls.push(toolCallOf(part));
    else if (type === "tool_call_response") results.push(part);
    else if (part.content !== undefined)
      texts.push(typeof part.content === "string" ? part.content : JSON.stringify(part.content));
  }
  const out = [];
  if (texts.length || reasoning.length || toolCalls.length || !results.length) {
    out.push({
      role,
      text: texts.join("\n"),
      images: [],
      reasoning: reasoning.length ? reasoning.join("\n") : null,
      toolCalls,
      toolCallId: null,
      name: message.name ?? null,
    });
  }
  for (const result of results) {
    const response = result.response ?? result.result ?? result.content ?? "";
    out.push({
      role: "tool",
      text: typeof response === "string" ? response : JSON.stringify(response, null, 2),
      images: [],
      reasoning: null,
      toolCalls: [],
      toolCallId: result.id ?? null,
      name: result.name ?? null,
    });
  }
  return out;
}

function attribute(trace, name) {
  const value = trace[name] ?? (isObject(trace.attributes) ? trace.attributes[name] : undefined);
  const parsed = parsedJson(value);
  return Array.isArray(parsed) ? parsed : null;
}

function genAiConversation(trace) {
  const system = attribute(trace, "gen_ai.system_instructions");
  const input = attribute(trace, "gen_ai.input.messages");
  const output = attribute(trace, "gen_ai.output.messages");
  if (!input && !output && !system) return null;
  const messages = [];
  if (system) messages.push(...genAiMessages({ role: "system", parts: system }));
  for (const message of input ?? []) messages.push(...genAiMessages(message));
  for (const message of output ?? []) messages.push(...genAiMessages(message).map((m) => ({ ...m, sampled: true })));
  return messages;
}

// Root-to-leaf paths of a verifiers message graph, in the order their leaves were added.
function branchesOf(nodes) {
  const isParent = new Set();
  for (const node of nodes) if (Number.isInteger(node?.parent)) isParent.add(node.parent);
  const branches = [];
  nodes.forEach((node, index) => {
    if (isParent.has(index)) return;
    const path = [];
    const seen = new Set();
    for (
      let at = index;
      Number.isInteger(at) && at >= 0 && at < nodes.length && !seen.has(at);
      at = nodes[at]?.parent
    ) {
      seen.add(at);
      path.unshift(at);
    }
    branches.push(path);
  });
  return branches;
}

function graphConversation(trace) {
  const nodes = trace.nodes.filter((n) => isObject(n));
  const calls = Array.isArray(trace.calls) ? trace.calls.filter(isObject) : [];
  const callOfNode = new Map(calls.filter((c) => Number.isInteger(c.node)).map((c) => [c.node, c]));
  const failed = calls.filter((c) => !Number.isInteger(c.node));
  return branchesOf(nodes).map((path) => ({
    messages: path.map((index) =>
      chatMessage(nodes[index].message, {
        sampled: nodes[index].sampled === true,
        call: callOfNode.get(index) ?? null,
      }),
    ),
    failedCalls: failed,
  }));
}

function listOf(value) {
  const parsed = parsedJson(value);
  if (Array.isArray(parsed)) return parsed;
  if (typeof parsed === "string" && parsed !== "") return [{ role: "assistant", content: parsed }];
  return [];
}

// {branches: [{messages, failedCalls}]} for one trace-like record; branches is empty when nothing was found.
export function conversationOf(trace) {
  if (!isObject(trace)) return { branches: [] };
  if (Array.isArray(trace.nodes) && trace.nodes.length) return { branches: graphConversation(trace) };
  if (Array.isArray(trace.messages) && trace.messages.length) {
    return { branches: [{ messages: trace.messages.map((m) => chatMessage(m)), failedCalls: [] }] };
  }
  const genAi = genAiConversation(trace);
  if (genAi) return { branches: [{ messages: genAi, failedCalls: [] }] };
  const prompt = listOf(trace.prompt).map((m) => chatMessage(typeof m === "string" ? { role: "user", content: m } : m));
  const completion = listOf(trace.completion).map((m) => chatMessage(m));
  if (prompt.length || completion.length)
    return { branches: [{ messages: [...prompt, ...completion], failedCalls: [] }] };
  return { branches: [] };
}

// The platform's training viewer reads a row as prompt = the messages before the first model
// reply, completion = the rest (Parquet rows keep every message in `completion`, `prompt` empty).
export function splitPrompt(messages) {
  const first = messages.findIndex((m) => m.role === "assistant");
  if (first < 0) return { prompt: messages, completion: [] };
  return { prompt: messages.slice(0, first), completion: messages.slice(first) };
}

export function promptAndCompletion(row) {
  const prompt = listOf(row?.prompt).map((m) => chatMessage(typeof m === "string" ? { role: "user", content: m } : m));
  const completion = listOf(row?.completion).map((m) => chatMessage(m));
  return splitPrompt([...prompt, ...completion]);
}

// One line of a message for table cells.
export function messagePreview(message) {
  if (!message) return "";
  if (message.text && message.text.trim()) return message.text;
  if (message.toolCalls?.length) return message.toolCalls.map((c) => `${c.name}(${c.arguments})`).join(" ");
  return message.reasoning ?? "";
}

export function lastOfRole(messages, role) {
  for (let i = messages.length - 1; i >= 0; i -= 1) if (messages[i].role === role) return messages[i];
  return null;
}
