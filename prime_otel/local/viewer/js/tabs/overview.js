// Overview tab: the run's numbers as cards, its reward histogram, the delivery report, and for a
// training run one chart per logged metric. Re-rendered in place while the run is live.
import {
  card,
  el,
  fmtCount,
  fmtJson,
  fmtNumber,
  fmtPercent,
  fmtStat,
  fmtTime,
  isObject,
  notice,
  plural,
  replaceChildren,
} from "../dom.js";
import { histogram, metricPanel } from "../charts.js";
import { simpleTable } from "../table.js";

const RESERVED = new Set(["step", "_timestamp"]);
const DELIVERY_COLUMNS = ["delivered", "failed", "dropped", "spooled", "replayed", "possibly_missing"];
const LOSSES = new Set(["failed", "dropped", "possibly_missing"]);

function finite(value) {
  return typeof value === "number" && Number.isFinite(value);
}

function stepOf(row) {
  return finite(row?.step) ? row.step : null;
}

export function metricNames(rows) {
  const names = new Set();
  for (const row of rows)
    for (const [name, value] of Object.entries(row)) if (!RESERVED.has(name) && finite(value)) names.add(name);
  return [...names].sort();
}

// Rows' source for the cards and histogram: the episodes when there are any, else the v0 samples.
function rowStats(stats) {
  if (stats?.episodes?.count) return { stats: stats.episodes, noun: "episode" };
  if (stats?.samples?.count) return { stats: stats.samples, noun: "sample" };
  return { stats: null, noun: "episode" };
}

function section(title, testid, ...children) {
  return el("section", { class: "overview-section", testid }, el("h3", {}, title), children);
}

function cardsRow(cards, testid) {
  return el("div", { class: "cards", testid }, cards.filter(Boolean));
}

export class OverviewTab {
  constructor(api, run, stats) {
    this.run = run;
    this.stats = stats;
    this.root = el("div", { class: "overview" });
  }

  mount(panel) {
    panel.append(this.root);
    this.render();
  }

  refresh(run, stats) {
    this.run = run;
    this.stats = stats ?? this.stats;
    this.render();
  }

  render() {
    replaceChildren(this.root, this.run.kind === "train" ? this.training() : this.evaluation());
  }

  // -- evaluations -------------------------------------------------------------------

  evaluation() {
    const run = this.run;
    const summary = isObject(run.summary) ? run.summary : {};
    const { stats, noun } = rowStats(this.stats);
    const reported = finite(summary.avg_reward);
    const metrics = isObject(summary.avg_metrics) ? summary.avg_metrics : (stats?.avg_metrics ?? {});
    const cards = [
      card("reward", fmtStat(reported ? summary.avg_reward : stats?.avg_reward), {
        key: "reward",
        sub: reported ? "mean, reported by the run" : stats ? `mean of ${plural(stats.rewarded, noun)}` : null,
        tone: "accent",
      }),
      this.errorCard(finite(summary.avg_error) ? summary.avg_error : stats?.error_rate, stats, noun),
      card("episodes", fmtCount(run.num_episodes), { key: "episodes", sub: plural(run.num_traces, "trace") }),
      card("samples", fmtCount(run.num_samples), { key: "samples", sub: "v0 sample rows" }),
      this.tokensCard(stats),
    ];
    return [
      section(
        "Summary",
        "summary-cards",
        cardsRow(cards, "cards"),
        Object.keys(metrics).length
          ? cardsRow(
              Object.entries(metrics).map(([name, value]) =>
                card(name, fmtStat(value), { key: `metric:${name}`, sub: "mean", testid: "metric-card" }),
              ),
              "metric-cards",
            )
          : null,
      ),
      this.histogramSection(stats, noun),
      section("Delivery", "delivery", this.delivery(summary)),
      this.otherSummary(summary),
    ];
  }

  errorCard(rate, stats, noun) {
    return card("error rate", fmtPercent(rate), {
      key: "error-rate",
      sub: stats ? `${fmtCount(stats.errors)} of ${plural(stats.count, noun)} with an error` : null,
      tone: finite(rate) && rate > 0 ? "warn" : null,
    });
  }

  tokensCard(stats) {
    if (!stats) return null;
    const { input, output } = stats.tokens ?? {};
    return card("tokens", fmtCount((input ?? 0) + (output ?? 0)), {
      key: "tokens",
      sub: `${fmtCount(input)} in · ${fmtCount(output)} out`,
    });
  }

  histogramSection(stats, noun) {
    const bins = stats?.reward_histogram ?? [];
    return section(
      "Reward distribution",
      "reward-distribution",
      bins.length ? histogram(bins, { noun }) : notice("No rewards yet.", "histogram-empty"),
    );
  }

  delivery(summary) {
    const block = isObject(summary.prime_runs) ? summary.prime_runs : {};
    const sinks = isObject(block.delivery) ? Object.entries(block.delivery).filter(([, v]) => isObject(v)) : [];
    if (!sinks.length) {
      return notice(
        "This run's summary carries no delivery report (prime-otel adds one to an evaluation's summary when it finishes).",
        "delivery-empty",
      );
    }
    const columns = [
      { key: "sink", label: "sink", cell: ([sink]) => el("code", {}, sink) },
      ...DELIVERY_COLUMNS.map((name) => ({
        key: name,
        label: name.replaceAll("_", " "),
        numeric: true,
        cell: ([, counts]) => {
          const value = counts[name];
          return el("span", { class: LOSSES.has(name) && value > 0 ? "text-error" : null }, fmtCount(value ?? 0));
        },
      })),
    ];
    const lossy = ([, counts]) => [...LOSSES].some((name) => counts[name] > 0);
    return [
      simpleTable("delivery-table", columns, sinks, "delivery-row", {
        rowClass: (s) => (lossy(s) ? "row-error" : null),
      }),
      finite(block.traces_episodes_written)
        ? el("p", { class: "muted" }, `${plural(block.traces_episodes_written, "episode")} written to Prime Traces.`)
        : null,
    ];
  }

  otherSummary(summary) {
    const known = new Set(["avg_reward", "avg_error", "avg_metrics", "prime_runs"]);
    const others = Object.entries(summary).filter(
      ([name, v]) => !known.has(name) && (finite(v) || typeof v === "string"),
    );
    return [
      others.length
        ? section(
            "Other summary values",
            "summary-other",
            cardsRow(
              others.map(([name, v]) => card(name, finite(v) ? fmtStat(v) : v, { key: `summary:${name}` })),
              "summary-other-cards",
            ),
          )
        : null,
      Object.keys(summary).length
        ? el(
            "details",
            { class: "more" },
            el("summary", { testid: "summary-json-toggle" }, "Summary as stored (JSON)"),
            el("pre", { class: "json", testid: "summary-json" }, fmtJson(summary)),
          )
        : null,
    ];
  }

  // -- training runs -----------------------------------------------------------------

  training() {
    const run = this.run;
    const rows = (Array.isArray(run.metric_rows) ? run.metric_rows : []).filter(isObject);
    const names = metricNames(rows);
    const { stats, noun } = rowStats(this.stats);
    const metrics = stats?.avg_metrics ?? {};
    return [
      this.lastStep(rows, names),
      section(
        "Metrics",
        "metrics-section",
        names.length ? this.panels(rows, names) : notice("No metric rows were logged yet.", "empty"),
      ),
      section(
        "Episodes",
        "episode-cards",
        cardsRow(
          [
            card("reward", fmtStat(stats?.avg_reward), {
              key: "reward",
              sub: stats ? `mean of ${plural(stats.rewarded, noun)}` : "no episodes yet",
              tone: "accent",
            }),
            this.errorCard(stats?.error_rate, stats, noun),
            card("episodes", fmtCount(run.num_episodes), { key: "episodes", sub: plural(run.num_traces, "trace") }),
            this.tokensCard(stats),
            ...Object.entries(metrics).map(([name, value]) =>
              card(name, fmtStat(value), { key: `metric:${name}`, sub: "mean", testid: "metric-card" }),
            ),
          ],
          "cards",
        ),
      ),
      this.histogramSection(stats, noun),
      section("Received by the platform", "received", this.received(rows)),
      rows.length
        ? el(
            "details",
            { class: "more" },
            el("summary", { testid: "metric-rows-toggle" }, `All metric rows (${rows.length})`),
            this.metricTable(rows, names),
          )
        : null,
    ];
  }

  lastStep(rows, names) {
    const stepped = rows.filter((r) => stepOf(r) !== null);
    if (!stepped.length) return null;
    const lastStep = Math.max(...stepped.map(stepOf));
    const latest = new Map();
    for (const row of [...stepped].sort((a, b) => stepOf(a) - stepOf(b))) {
      for (const name of names) if (finite(row[name])) latest.set(name, { value: row[name], step: row.step });
    }
    return section(
      `Last step: ${lastStep}`,
      "last-step",
      cardsRow(
        names.map((name) => {
          const entry = latest.get(name);
          return card(name, fmtStat(entry.value), {
            key: `last:${name}`,
            testid: "last-card",
            sub: entry.step === lastStep ? null : `at step ${entry.step}`,
          });
        }),
        "last-cards",
      ),
    );
  }

  // One small chart per key, in key order, so that "eval/…" or "reward/…" panels sit together.
  panels(rows, names) {
    return el(
      "div",
      { class: "panels", testid: "metric-panels" },
      names.map((name) => {
        const points = rows
          .filter((r) => stepOf(r) !== null && finite(r[name]))
          .map((r) => ({ x: r.step, y: r[name] }))
          .sort((a, b) => a.x - b.x);
        return points.length ? metricPanel(name, points) : null;
      }),
    );
  }

  received(rows) {
    const run = this.run;
    const objects = Array.isArray(run.objects) ? run.objects : [];
    const steps = rows.map(stepOf).filter((s) => s !== null);
    const objectSteps = new Set(objects.map((o) => o.step));
    const parquetRows = objects.reduce((sum, o) => sum + (Number(o.rows) || 0), 0);
    const entries = [
      ["metric rows", fmtCount(rows.length), steps.length ? `steps ${Math.min(...steps)}–${Math.max(...steps)}` : ""],
      [
        "Parquet sample rows",
        fmtCount(parquetRows),
        `${plural(objects.length, "object")} over ${plural(objectSteps.size, "step")}`,
      ],
      ["episodes", fmtCount(run.num_episodes), ""],
      ["traces", fmtCount(run.num_traces), ""],
    ];
    return [
      simpleTable(
        "received-table",
        [
          { key: "what", label: "", cell: ([what]) => what },
          { key: "count", label: "count", numeric: true, cell: ([, count]) => count },
          { key: "detail", label: "", cell: ([, , detail]) => el("span", { class: "muted" }, detail) },
        ],
        entries,
        "received-row",
      ),
      el(
        "p",
        { class: "muted" },
        "A training run's delivery report stays with the producer (run.report and the run folder); the platform has no summary document for it.",
      ),
    ];
  }

  metricTable(rows, names) {
    const sorted = [...rows].sort((a, b) => (stepOf(a) ?? Infinity) - (stepOf(b) ?? Infinity));
    const columns = [
      { key: "step", label: "step", numeric: true, cell: (r) => fmtNumber(r.step) },
      { key: "_timestamp", label: "time (UTC)", cell: (r) => fmtTime(r._timestamp) },
      ...names.map((n) => ({ key: n, label: n, numeric: true, cell: (r) => fmtNumber(r[n]) })),
    ];
    return simpleTable("metrics-table", columns, sorted, "metrics-row");
  }
}
