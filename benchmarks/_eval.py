"""The eval workload: N episodes logged one per call, each SDK in its own process, alternating over rounds."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks._harness import Harness
from benchmarks._report import Metric, Section, Target, compare, errors_note

SDKS = ("prime-runs", "ours")


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    like_for_like: str
    traces_enabled: bool
    our_sinks: str
    store: str  # where every delivered episode ends up: "episodes" (Prime Traces) or "samples" (legacy table)


SCENARIOS = {
    scenario.key: scenario
    for scenario in (
        Scenario(
            key="traces",
            title='eval, Prime Traces: prime-runs 0.1.4 (exclusive routing) vs ours sinks="traces", '
            "traces-enabled account",
            like_for_like="LIKE-FOR-LIKE: both write every episode to Prime Traces only.",
            traces_enabled=True,
            our_sinks="traces",
            store="episodes",
        ),
        Scenario(
            key="legacy",
            title='eval, legacy table: prime-runs 0.1.4 (fallback) vs ours sinks="dual" (default), '
            "traces-disabled account",
            like_for_like="LIKE-FOR-LIKE in what is stored: Prime Traces answers 403 service_not_enabled to both, "
            "both write every episode to the legacy samples table only.",
            traces_enabled=False,
            our_sinks="dual",
            store="samples",
        ),
    )
}


def _per_episode_us(run: dict[str, Any]) -> float | None:
    delivered = run["delivered"]
    return run["cpu_s"] / delivered * 1e6 if delivered else None


EVAL_METRICS = (
    Metric("CPU per delivered episode (us)", _per_episode_us, 1, Target("<= 0.50x", ratio_at_most=0.5)),
    Metric(
        "log_episodes([ep]) median (us)",
        lambda r: r["log_episodes_ns"]["median_us"],
        2,
        Target("< 10 us", ours_below=10),
    ),
    Metric("log_episodes([ep]) p99 (us)", lambda r: r["log_episodes_ns"]["p99_us"], 1),
    Metric("HTTP requests", lambda r: r["requests"]["total"], 0),
    Metric("request bodies sent (KiB, as sent)", lambda r: r["requests"]["body_bytes"] / 1024, 0),
    Metric("peak RSS (MiB)", lambda r: r["peak_rss_kib"] / 1024, 1),
    Metric("wall init -> finish returned (s)", lambda r: r["wall_s"], 2),
    Metric("  of which finish() (s)", lambda r: r["finish_s"], 2),
    Metric("CPU init -> finish (s)", lambda r: r["cpu_s"], 3),
    Metric("  of which init() (s)", lambda r: r["init_cpu_s"], 3),
    Metric("delivered episodes", lambda r: r["delivered"], 0),
)


def run_eval(harness: Harness, scenarios: list[Scenario], episodes: int, rounds: int) -> dict[str, Any]:
    """Every scenario, ``rounds`` times, the two SDKs alternating which goes first."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s.key: {sdk: [] for sdk in SDKS} for s in scenarios}
    for round_index in range(rounds):
        order = SDKS if round_index % 2 == 0 else SDKS[::-1]
        for scenario in scenarios:
            harness.account(scenario.traces_enabled)
            for sdk in order:
                spec: dict[str, Any] = {"sdk": sdk, "workload": "eval", "episodes": episodes}
                if sdk == "ours":
                    spec["sinks"] = scenario.our_sinks
                result = harness.run(spec)
                result["delivered"] = result["stored"][scenario.store]
                runs[scenario.key][sdk].append(result)
                print(f"  eval/{scenario.key} round {round_index + 1}/{rounds} {sdk}: {_brief(result)}", flush=True)
    harness.account(True)
    return runs


def eval_sections(scenarios: list[Scenario], runs: dict[str, Any], episodes: int, rounds: int) -> list[Section]:
    sections = []
    for scenario in scenarios:
        theirs, ours = runs[scenario.key]["prime-runs"], runs[scenario.key]["ours"]
        notes = [
            scenario.like_for_like,
            f"{episodes} episodes built beforehand, logged one per call; each SDK in a fresh process; "
            f"median of {rounds} alternating rounds.",
        ]
        notes += _round_ratios(theirs, ours) + _losses(theirs + ours, episodes) + errors_note(theirs + ours)
        sections.append(Section(scenario.title, notes, compare(EVAL_METRICS, theirs, ours)))
    return sections


def _round_ratios(theirs: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[str]:
    """CPU per episode, ours / 0.1.4, within each round: how far the machine's noise moves the ratio."""
    ratios = sorted(
        per_ours / per_theirs
        for per_theirs, per_ours in zip(map(_per_episode_us, theirs), map(_per_episode_us, ours), strict=True)
        if per_theirs and per_ours
    )
    if not ratios:
        return []
    listed = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    return [f"CPU per episode ours/0.1.4 within each round, sorted: {listed} (median {statistics.median(ratios):.2f})."]


def _losses(runs: list[dict[str, Any]], episodes: int) -> list[str]:
    short = [f"{r['run_id']} delivered {r['delivered']}/{episodes}" for r in runs if r["delivered"] != episodes]
    return [f"WARNING: not every episode was stored: {', '.join(short)}"] if short else []


def _brief(result: dict[str, Any]) -> str:
    return (
        f"cpu {result['cpu_s']:.2f}s wall {result['wall_s']:.2f}s delivered {result['delivered']} "
        f"requests {result['requests']['total']}"
    )
