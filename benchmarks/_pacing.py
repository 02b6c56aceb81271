"""Pacing (issue 21): the requests each SDK makes of the rate-limited endpoints, how many the platform refuses, and
how long ``finish()`` takes after the producer's last call; each SDK in its own process, one round, each child on
a fresh local platform (the limits count per token and minute: no child inherits another's window).

- eval: one episode per ``log_episodes`` call at 100 a second, on a platform with its DEFAULT limits (300 sample
  appends a minute per token); ours with ``sinks="dual"`` (both tables), 0.1.4 with its default routing, on an
  account inside the Prime Traces beta and on one outside it (where 0.1.4 falls back to the sample table);
- train: 4 trainer threads each log their own keys for every step. Per 1,000 steps on a platform whose metrics
  limit is raised (at the default 60 a minute 1,000 steps take 17 minutes even at one request per step; the
  harness tells ours every platform's limits, see ``_harness.py``), and a short run at the DEFAULT limit, where
  the requests beyond 60 a minute are answered 429 (prime-runs) or wait (ours).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._eval import SDKS
from benchmarks._harness import ChildFailed, Harness
from benchmarks._report import Metric, Section, compare, errors_note
from prime_otel.testing import start_local_platform

SAMPLES = "/samples"
TRACES = "POST /api/v1/traces"
METRICS = "/rft/metrics"


@dataclass(frozen=True)
class PacingSettings:
    episodes: int = 1000
    rate: float = 100.0
    steps: int = 1000
    limited_steps: int = 30
    threads: int = 4


def _posts(result: dict[str, Any], route: str, status: int | None = None) -> int:
    """POSTs whose route contains ``route`` (with ``status`` when given), from the platform's request log."""
    total = 0
    for key, count in result["requests"]["by_route"].items():
        method_route, _, answered = key.rpartition(" ")
        if method_route.startswith("POST") and route in method_route and (status is None or answered == str(status)):
            total += count
    return total


def _refused(result: dict[str, Any]) -> int:
    return sum(count for key, count in result["requests"]["by_route"].items() if key.endswith(" 429"))


def _per(count: float, of: int) -> float:
    return count / of * 1000 if of else 0.0


EVAL_METRICS = (
    Metric("HTTP requests per 1,000 episodes", lambda r: _per(r["requests"]["total"], r["logged"]), 0),
    Metric("  sample-table POSTs per 1,000 episodes", lambda r: _per(_posts(r, SAMPLES), r["logged"]), 0),
    Metric("  Prime Traces POSTs per 1,000 episodes", lambda r: _per(_posts(r, TRACES), r["logged"]), 0),
    Metric("answers 429", _refused, 0),
    Metric("finish() after the last call (s)", lambda r: r["finish_s"], 2),
    Metric("episodes stored in Prime Traces", lambda r: r["stored"]["episodes"], 0),
    Metric("rows stored in the sample table", lambda r: r["stored"]["samples"], 0),
)

TRAIN_METRICS = (
    Metric("metrics POSTs per 1,000 steps", lambda r: _per(_posts(r, METRICS), r["steps"]), 0),
    Metric("HTTP requests per 1,000 steps", lambda r: _per(r["requests"]["total"], r["steps"]), 0),
    Metric("answers 429", _refused, 0),
    Metric("complete rows stored (all keys of the step)", lambda r: r["complete_rows"], 0),
    Metric("the threads' log_metrics calls (s)", lambda r: r["logging_s"], 2),
    Metric("finish() after the last call (s)", lambda r: r["finish_s"], 2),
    Metric("first call -> finish returned (s)", lambda r: r["logging_s"] + r["finish_s"], 2),
)


def run_pacing(scratch: Path, settings: PacingSettings) -> dict[str, Any]:
    """Every child on a platform of its own: the limits count per token and minute, so a child must not inherit
    the window the previous one filled."""
    results: dict[str, Any] = {"eval": {}, "train": {}, "train_limited": {}, "failures": []}
    failures: list[str] = results["failures"]
    for account, traces_enabled in (("traces", True), ("legacy", False)):
        runs = results["eval"][account] = {}
        for sdk in SDKS:
            spec: dict[str, Any] = {"sdk": sdk, "workload": "paced_eval", "episodes": settings.episodes}
            spec["rate"] = settings.rate
            if sdk == "ours":
                spec["sinks"] = "dual"
            runs[sdk] = _on_own_platform(scratch, spec, failures, traces_enabled=traces_enabled)
            print(f"  pacing/eval-{account} {sdk}: {_brief(runs[sdk])}", flush=True)
    limited: dict[str, Any] = {}
    for key, steps, limits in (
        ("train_limited", settings.limited_steps, limited),
        ("train", settings.steps, {"metrics_rate_limit": 1_000_000}),
    ):
        for sdk in SDKS:
            spec = {"sdk": sdk, "workload": "threaded_train", "steps": steps, "threads": settings.threads}
            result = _on_own_platform(scratch, spec, failures, complete_keys=2 * settings.threads, limits=limits)
            results[key][sdk] = result
            print(f"  pacing/train {steps} steps {sdk}: {_brief(result)}", flush=True)
    return results


def _on_own_platform(
    scratch: Path,
    spec: dict[str, Any],
    failures: list[str],
    *,
    traces_enabled: bool = True,
    complete_keys: int = 0,
    limits: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Runs one child against a fresh local platform (default limits unless ``limits`` raise them)."""
    folder = scratch / f"platform-{len(list(scratch.glob('platform-*')))}"
    with start_local_platform(folder, **(limits or {})) as platform:
        harness = Harness(platform, scratch)
        harness.account(traces_enabled)
        result = _attempt(harness, spec, failures)
        if result is not None and complete_keys:
            rows = platform.inspect.run(result["run_id"]).get("metric_rows") or []
            result["complete_rows"] = sum(
                1 for row in rows if len([k for k in row if k.startswith("thread_")]) == complete_keys
            )
    return result


def _attempt(harness: Harness, spec: dict[str, Any], failures: list[str]) -> dict[str, Any] | None:
    try:
        return harness.run(spec)
    except (ChildFailed, subprocess.TimeoutExpired) as exc:  # the figure is missing; the rest goes on
        failures.append(f"{spec['sdk']} {spec['workload']}: {type(exc).__name__}: {str(exc)[:300]}")
        return None


def _brief(result: dict[str, Any] | None) -> str:
    if result is None:
        return "FAILED"
    return f"requests {result['requests']['total']} (429: {_refused(result)}) finish {result['finish_s']:.2f}s"


def _pair(runs: dict[str, dict[str, Any] | None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    theirs, ours = runs.get("prime-runs"), runs.get("ours")
    return ([theirs] if theirs else []), ([ours] if ours else [])


def pacing_sections(results: dict[str, Any], settings: PacingSettings) -> list[Section]:
    sections = []
    failures = [f"WARNING: a run failed: {failure}" for failure in results["failures"]]
    for account, runs in results["eval"].items():
        theirs, ours = _pair(runs)
        where = "inside the Prime Traces beta" if account == "traces" else "outside the Prime Traces beta"
        notes = [
            f"{settings.episodes} episodes, one log_episodes call each at {settings.rate:.0f}/s; local platform with "
            f'its default limits (300 sample appends a minute); account {where}. Ours: sinks="dual" (Prime '
            "Traces and the sample table); prime-runs 0.1.4: its default routing. One round.",
            *errors_note(theirs + ours),
        ]
        title = f"pacing (issue 21): eval at {settings.rate:.0f} episodes/s, account {where}"
        sections.append(Section(title, notes, compare(EVAL_METRICS, theirs, ours)))
    for key, steps, limits in (
        (
            "train",
            settings.steps,
            "a raised metrics limit (the default would take 17 minutes per 1,000 requests; ours is told it)",
        ),
        ("train_limited", settings.limited_steps, "its DEFAULT metrics limit (60 requests a minute)"),
    ):
        theirs, ours = _pair(results[key])
        notes = [
            f"{settings.threads} trainer threads each log their own 2 keys for every one of {steps} steps; local "
            f"platform with {limits}. One round.",
            *errors_note(theirs + ours),
        ]
        title = f"pacing (issue 21): training, {settings.threads} threads x {steps} steps, {limits.split(' (')[0]}"
        sections.append(Section(title, notes, compare(TRAIN_METRICS, theirs, ours)))
    if failures and sections:
        sections[-1].notes.extend(failures)
    return sections
