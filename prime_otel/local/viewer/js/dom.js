// DOM construction helpers. Untrusted values only ever become text nodes or attribute
// values; nothing here parses HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function applyAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "testid") node.setAttribute("data-testid", value);
    else if (name === "class") node.setAttribute("class", value);
    else if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  applyAttrs(node, attrs);
  append(node, children);
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  applyAttrs(node, attrs);
  append(node, children);
  return node;
}

export function replaceChildren(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

const STATUS_TONES = {
  RUNNING: "running",
  PROCESSING: "processing",
  COMPLETED: "completed",
  FAILED: "failed",
  CANCELLED: "cancelled",
};

export const ACTIVE_STATUSES = new Set(["RUNNING", "PROCESSING"]);

export function normalStatus(status) {
  return String(status ?? "UNKNOWN").toUpperCase();
}

export function statusBadge(status, testid = "run-status") {
  const text = normalStatus(status);
  const tone = STATUS_TONES[text] ?? "unknown";
  return el("span", { class: `badge status-${tone}`, testid, "data-status": text }, text);
}

export function kindBadge(kind) {
  return el("span", { class: "badge kind", testid: "run-kind" }, String(kind ?? "?"));
}

export function fmtNumber(value, digits = 4) {
  if (value === null || value === undefined || value === "") return "—";
  const n = Number(value);
  if (!Number.isFinite(n)) return String(value);
  if (Number.isInteger(n)) return String(n);
  return String(Number(n.toFixed(digits)));
}

export function fmtBool(value) {
  if (value === true) return "yes";
  if (value === false) return "no";
  return "—";
}

export function fmtBytes(value) {
  const n = Number(value);
  if (!Number.isFinite(n)) return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

// Timestamps are shown in UTC so that every viewer of the same run sees the same text.
export function fmtTime(value) {
  if (value === null || value === undefined || value === "") return "—";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
}

export function fmtJson(value) {
  return JSON.stringify(value, null, 2) ?? "null";
}

export function truncate(text, max) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

export function runHref(id, tab) {
  const base = `#/runs/${encodeURIComponent(id)}`;
  return tab ? `${base}/${encodeURIComponent(tab)}` : base;
}

export function notice(text, testid = "notice", tone = "info") {
  return el("p", { class: `notice notice-${tone}`, testid }, text);
}
