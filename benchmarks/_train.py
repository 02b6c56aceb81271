"""The training workload (issue 4): steps of episodes plus one metrics row per step, each SDK in its own process."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from benchmarks._eval import SDKS
from benchmarks._harness import Harness
from benchmarks._report import Metric, Section, Target, compare, errors_note

TRAIN_METRICS = (
    Metric(
        "log_metrics(row, step=s) median (us)",
        lambda r: r["log_metrics_ns"]["median_us"],
        2,
        Target("< 20 us", ours_below=20),
    ),
    Metric("log_metrics(row, step=s) p99 (us)", lambda r: r["log_metrics_ns"]["p99_us"], 1),
    Metric("log_episodes(step batch) median (us)", lambda r: r["log_episodes_ns"]["median_us"], 2),
    Metric("log_episodes(step batch) p99 (us)", lambda r: r["log_episodes_ns"]["p99_us"], 1),
    Metric("metric rows stored", lambda r: r["stored"]["metric_rows"], 0),
    Metric("episodes stored (Prime Traces)", lambda r: r["stored"]["episodes"], 0),
    Metric("HTTP requests", lambda r: r["requests"]["total"], 0),
    Metric("request bodies sent (KiB, as sent)", lambda r: r["requests"]["body_bytes"] / 1024, 0),
    Metric("CPU init -> finish (s)", lambda r: r["cpu_s"], 3),
    Metric("  of which init() (s)", lambda r: r["init_cpu_s"], 3),
    Metric("peak RSS (MiB)", lambda r: r["peak_rss_kib"] / 1024, 1),
    Metric("wall init -> finish returned (s)", lambda r: r["wall_s"], 2),
)
METRIC_LATENCY_LABELS = {TRAIN_METRICS[0].label, TRAIN_METRICS[1].label}


def run_train(harness: Harness, steps: int, per_step: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {sdk: [] for sdk in SDKS}
    harness.account(True)
    for round_index in range(rounds):
        for sdk in SDKS if round_index % 2 == 0 else SDKS[::-1]:
            spec: dict[str, Any] = {"sdk": sdk, "workload": "train", "steps": steps, "per_step": per_step}
            if sdk == "ours":
                spec["sinks"] = "traces"  # like 0.1.4: training samples only when Prime Traces is not enabled
            result = harness.run(spec)
            runs[sdk].append(result)
            stored = result["stored"]
            print(
                f"  train round {round_index + 1}/{rounds} {sdk}: cpu {result['cpu_s']:.2f}s "
                f"metric rows {stored['metric_rows']}/{steps} episodes {stored['episodes']}",
                flush=True,
            )
    return runs


def metrics_skip_reason(ours: list[dict[str, Any]], steps: int) -> str | None:
    """Why our metric logging cannot be compared yet (detected by trying), or None when it can."""
    stored = [run["stored"]["metric_rows"] for run in ours]
    if all(count == steps for count in stored):
        return None
    return (
        f'skipped: prime_otel.init(kind="train") did not deliver its metrics (metric rows stored per run: '
        f"{stored}, expected {steps}); our log_metrics latency is not comparable until the training metrics "
        "sink exists."
    )


def train_section(runs: dict[str, list[dict[str, Any]]], steps: int, per_step: int, rounds: int) -> Section:
    skip = metrics_skip_reason(runs["ours"], steps)
    rows = compare(TRAIN_METRICS, runs["prime-runs"], runs["ours"])
    notes = [
        f"{steps} steps x {per_step} train episodes (run.work.step set), log_episodes(batch) then "
        f"log_metrics(row, step=s) each step; traces-enabled account (both route episodes to Prime Traces "
        f"only); median of {rounds} alternating rounds."
    ]
    notes += errors_note(runs["prime-runs"] + runs["ours"])
    if skip is not None:
        notes.append(skip)
        notes.append("CPU, requests and wall below are NOT like-for-like while our metrics are not delivered.")
        rows = [replace(row, ours=None) if row.label in METRIC_LATENCY_LABELS else row for row in rows]
    return Section('training (issue 4): prime-runs 0.1.4 vs ours, kind="train"', notes, rows)
