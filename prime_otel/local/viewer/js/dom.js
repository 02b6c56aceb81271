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

// Tiny magnitudes (learning rates) in exponent form: 1e-6, not 0.000001.
function tiny(n) {
  return n !== 0 && Math.abs(n) < 1e-3 ? Number(n.toPrecision(3)).toExponential() : null;
}

export function fmtNumber(value, digits = 4) {
  if (value === null || value === undefined || value === "") return "—";
  const n = Number(value);
  if (!Number.isFinite(n)) return String(value);
  if (Number.isInteger(n)) return String(n);
  return tiny(n) ?? String(Number(n.toFixed(digits)));
}

// Card-sized numbers: three decimals at most, thousands separated.
export function fmtStat(value) {
  if (value === null || value === undefined || value === "") return "—";
  const n = Number(value);
  if (!Number.isFinite(n)) return String(value);
  if (Number.isInteger(n)) return n.toLocaleString("en-US");
  const digits = Math.abs(n) >= 100 ? 1 : 3;
  return tiny(n) ?? Number(n.toFixed(digits)).toLocaleString("en-US", { maximumFractionDigits: digits });
}

export function fmtPercent(value) {
  const n = Number(value);
  if (value === null || value === undefined || !Number.isFinite(n)) return "—";
  return `${Number((n * 100).toFixed(1))}%`;
}

export function fmtCount(value) {
  const n = Number(value);
  return value === null || value === undefined || !Number.isFinite(n) ? "—" : n.toLocaleString("en-US");
}

// "1 episode", "3 episodes"
export function plural(count, noun) {
  return `${fmtCount(count)} ${noun}${Number(count) === 1 ? "" : "s"}`;
}

export function fmtDuration(seconds) {
  const s = Number(seconds);
  if (seconds === null || seconds === undefined || !Number.isFinite(s) || s < 0) return "—";
  if (s < 10) return `${Number(s.toFixed(2))} s`;
  if (s < 60) return `${Number(s.toFixed(1))} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(minutes / 60)}h ${String(minutes % 60).padStart(2, "0")}m`;
}

export function epochSeconds(value) {
  if (value === null || value === undefined || value === "") return null;
  const ms = typeof value === "number" ? value * 1000 : Date.parse(value);
  return Number.isFinite(ms) ? ms / 1000 : null;
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

export function runHref(id, tab, item) {
  const base = `#/runs/${encodeURIComponent(id)}`;
  if (!tab) return base;
  return item ? `${base}/${encodeURIComponent(tab)}/${encodeURIComponent(item)}` : `${base}/${encodeURIComponent(tab)}`;
}

export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// A JSON text column (Parquet rows) or an already-decoded value.
export function parsedJson(value) {
  if (typeof value !== "string" || !/^\s*[[{]/.test(value)) return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

// A labelled number tile: the overview's cards.
export function card(label, value, { testid = "card", sub = null, tone = null, key = null } = {}) {
  return el(
    "div",
    { class: `stat-card${tone ? ` tone-${tone}` : ""}`, testid, "data-key": key ?? label },
    el("div", { class: "stat-label" }, label),
    el("div", { class: "stat-value", testid: "card-value" }, value),
    sub ? el("div", { class: "stat-sub" }, sub) : null,
  );
}

// A button that shows and hides a lazily-built block below it (the raw JSON of a record).
export function revealer(label, build, testid) {
  const area = el("div", { class: "reveal-area", hidden: true });
  const button = el("button", { type: "button", class: "small", "aria-expanded": "false", testid }, label);
  button.addEventListener("click", (event) => {
    event.stopPropagation();
    const opening = area.hidden;
    if (opening && !area.firstChild) area.append(build());
    area.hidden = !opening;
    button.setAttribute("aria-expanded", String(opening));
  });
  return [button, area];
}

export function notice(text, testid = "notice", tone = "info") {
  return el("p", { class: `notice notice-${tone}`, testid }, text);
}
