"""The spool workload (issue 6): a long eval against a platform that takes about a second per request.

Every POST is delayed by a fault rule of the local platform, so the platform accepts about one request per
second and the producer outruns it by far. One fresh child logs N JSON episode records (made on the fly),
one ``log_episodes([r])`` call each, as fast as it can, then ``finish(timeout=...)``: what is not
delivered by then stays in the spool. Reported: peak RSS and RSS every window of calls, call latency per
window, the spool on disk, what the delivery report says was delivered and is still spooled, wall time.
Optionally prime-runs 0.1.4 does the same for a shorter N (it has no spool: a full queue blocks the
producer, then drops).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._harness import Harness
from benchmarks._report import Section, Table
from benchmarks._stats import slope

MIB = 1024 * 1024
#: The child's timeout per call: about 14 ms measured on 2 cores, with a wide margin.
TIMEOUT_PER_CALL_SECONDS = 0.05
#: The verdicts' tolerances: over the second half of the calls RSS may grow this much per 1,000 calls (10 MiB
#: per 100,000: noise, not a per-record cost); the second half's call latency may exceed the first's this much.
RSS_SLOPE_KIB_PER_1000 = 100.0
LATENCY_GROWTH = 2.0


@dataclass(frozen=True)
class SpoolSettings:
    episodes: int
    window: int
    compare: int  # prime-runs 0.1.4's calls; 0 skips it
    delay_s: float
    finish_timeout: float


def run_spool(harness: Harness, scratch: Path, settings: SpoolSettings) -> dict[str, Any]:
    """Ours for ``episodes`` calls, then (optionally) prime-runs 0.1.4 for ``compare`` calls, each with its
    own PRIME_RUNS_DIR in ``scratch``, deleted once measured."""
    harness.account(True)
    harness.add_fault(method="POST", path="*", action="delay", delay_s=settings.delay_s, times=None)
    runs: dict[str, dict[str, Any]] = {}
    try:
        for sdk, calls in (("ours", settings.episodes), ("prime-runs", settings.compare)):
            if calls <= 0:
                continue
            runs_dir = scratch / f"spool-{sdk}"
            spec = {
                "sdk": sdk,
                "workload": "spool",
                "episodes": calls,
                "window": _window(settings, calls),
                "finish_timeout": settings.finish_timeout,
            }
            print(f"  spool {sdk}: {calls:,} calls against ~{settings.delay_s:g} s per POST ...", flush=True)
            try:
                result = harness.run(
                    spec, timeout=120 + calls * TIMEOUT_PER_CALL_SECONDS, env={"PRIME_RUNS_DIR": str(runs_dir)}
                )
            finally:
                shutil.rmtree(runs_dir, ignore_errors=True)
            runs[sdk] = result
            print(f"  spool {sdk}: {_brief(result)}", flush=True)
    finally:
        harness.clear_faults()
    return {"settings": vars(settings), "runs": runs}


def _window(settings: SpoolSettings, calls: int) -> int:
    return settings.window if settings.window > 0 else max(1, calls // 10)


def _brief(result: dict[str, Any]) -> str:
    return (
        f"wall {result['wall_s']:.0f}s peak RSS {result['peak_rss_kib'] / 1024:.0f} MiB "
        f"stored {result['stored']['episodes']} episodes, dropped {result['dropped_records']}"
    )


def spool_sections(results: dict[str, Any]) -> list[Section]:
    settings, runs = results["settings"], results["runs"]
    sections = []
    if "ours" in runs:
        sections.append(_ours_section(runs["ours"], settings))
    if runs:
        sections.append(_summary_section(runs, settings))
    return sections


def _ours_section(run: dict[str, Any], settings: dict[str, Any]) -> Section:
    windows = run["windows"]
    notes = [
        f"{run['logged']:,} JSON episode records (fixture records, ids varied on the fly), one log_episodes([r]) "
        f"call each, as fast as the producer can; every POST delayed {settings['delay_s']:g} s by a fault rule "
        f"(about one request per second); traces-enabled account, default sinks; then "
        f"finish(timeout={settings['finish_timeout']:g}). One fresh process.",
        *_verdicts(run),
        f"Wall: {run['wall_s']:.0f} s (init {run['init_s']:.1f} s, logging {run['logging_s']:.0f} s = "
        f"{run['logged'] / run['logging_s']:,.0f} calls/s, finish {run['finish_s']:.1f} s); CPU {run['cpu_s']:.0f} s; "
        f"spool on disk at the end {run['spool_bytes_at_end'] / MIB:,.1f} MiB; calls >= 10 ms: "
        f"{run['slow_calls']:,} of {run['logged']:,}, {run['slow_calls_s']:,.0f} s of the logging time.",
        *_losses(run),
    ]
    progress = Table(
        (
            "calls",
            "elapsed s",
            "RSS MiB",
            "peak RSS MiB",
            "spool MiB",
            "median us",
            "p99 us",
            "mean us",
            "calls >= 10 ms",
        ),
        [
            (
                f"{w['calls']:,}",
                f"{w['elapsed_s']:.0f}",
                f"{w['rss_kib'] / 1024:.1f}",
                f"{w['peak_rss_kib'] / 1024:.1f}",
                f"{w['spool_bytes'] / MIB:.1f}",
                f"{w['latency']['median_us']:,.1f}",
                f"{w['latency']['p99_us']:,.0f}",
                f"{w['latency']['mean_us']:,.0f}",
                f"{w['slow_calls']:,}",
            )
            for w in windows
        ],
    )
    tables = [progress]
    if run.get("report"):
        tables.append(_delivery_table(run["report"]["sinks"], run["stored"]))
    delay = settings["delay_s"]
    title = f"spool (issue 6): ours, {run['logged']:,} episodes against a platform taking ~{delay:g} s per POST"
    return Section(title, notes, tables=tables)


def _verdicts(run: dict[str, Any]) -> list[str]:
    """Bounded RSS: over the second half of the calls RSS does not keep growing with them; flat latency: the
    second half's calls are no slower than the first half's (which include the warm-up)."""
    windows, halves = run["windows"], run["halves"]
    peak = run["peak_rss_kib"] / 1024
    before = run["rss_before_init_kib"] / 1024
    if len(windows) < 3 or len(halves) < 2:
        return [f"Peak RSS {peak:.1f} MiB ({before:.1f} MiB before init); too few calls for a trend."]
    middle, last = windows[len(windows) // 2 - 1], windows[-1]
    growth = slope([(w["calls"], w["rss_kib"]) for w in windows[len(windows) // 2 - 1 :]]) * 1000
    bounded = growth <= RSS_SLOPE_KIB_PER_1000
    early, late = halves
    keys = (("median_us", "median", 1), ("p99_us", "p99", 0), ("mean_us", "mean", 0))
    grows = any(late[key] > LATENCY_GROWTH * early[key] for key, _, _ in keys)
    trend = ", ".join(f"{label} {early[key]:,.{digits}f} -> {late[key]:,.{digits}f} us" for key, label, digits in keys)
    return [
        f"Peak RSS {peak:.1f} MiB ({before:.1f} MiB before init); RSS after {middle['calls']:,} calls "
        f"{middle['rss_kib'] / 1024:.1f} MiB, after {last['calls']:,} {last['rss_kib'] / 1024:.1f} MiB; over the "
        f"second half {growth:+,.0f} KiB per 1,000 calls (least squares): bounded {'met' if bounded else 'MISSED'} "
        f"(criterion: at most {RSS_SLOPE_KIB_PER_1000:.0f} KiB per 1,000 calls).",
        f"log_episodes([r]) latency, first half of the calls -> second half: {trend}; calls >= 10 ms "
        f"{early['slow_calls']:,} -> {late['slow_calls']:,}: does not grow {'MISSED' if grows else 'met'} "
        f"(criterion: none more than {LATENCY_GROWTH:g}x).",
    ]


def _losses(run: dict[str, Any]) -> list[str]:
    lost = []
    if run["dropped_records"]:
        lost.append(f"dropped {run['dropped_records']:,}")
    if run["failed_records"]:
        lost.append(f"failed {run['failed_records']}")
    if run["errors"]:
        lost.append(f"errors: {run['errors'][0]}")
    return [f"WARNING: {'; '.join(lost)}"] if lost else []


def _delivery_table(sinks: Sequence[dict[str, Any]], stored: dict[str, Any]) -> Table:
    stored_by_sink = {"traces": stored["episodes"], "eval_samples": stored["samples"]}
    return Table(
        (
            "sink (run.report)",
            "delivered",
            "stored on platform",
            "spooled",
            "replayed",
            "still spooled",
            "dropped",
            "failed",
            "possibly missing",
            "requests",
        ),
        [
            (
                sink["sink"],
                f"{sink['delivered']:,}",
                f"{stored_by_sink[sink['sink']]:,}" if sink["sink"] in stored_by_sink else "-",
                f"{sink['spooled']:,}",
                f"{sink['replayed']:,}",
                f"{sink['pending']:,}",
                f"{sink['dropped']:,}",
                f"{sink['failed']:,}",
                f"{sink['possibly_missing']:,}",
                f"{sink['requests']:,}",
            )
            for sink in sinks
        ],
    )


def _summary_section(runs: dict[str, dict[str, Any]], settings: dict[str, Any]) -> Section:
    notes = [
        "Each SDK's own run (different N: prime-runs 0.1.4 has no spool, so a long run only repeats its "
        "pattern). 0.1.4 sends JSON episode records to Prime Traces only; ours (default sinks) also to the "
        "legacy sample table, two requests per delivery. Stored = episodes on the platform after finish.",
    ]
    labels = {"ours": "ours", "prime-runs": "prime-runs 0.1.4"}
    table = Table(
        (
            "SDK",
            "calls",
            "calls/s",
            "wall s",
            "peak RSS MiB",
            "median us",
            "p99 us",
            "max ms",
            "calls >= 10 ms",
            "dropped",
            "stored",
            "still spooled",
            "spool MiB at end",
        ),
        [
            (
                labels[sdk],
                f"{run['logged']:,}",
                f"{run['logged'] / run['logging_s']:,.0f}",
                f"{run['wall_s']:.0f}",
                f"{run['peak_rss_kib'] / 1024:.1f}",
                f"{run['log_episodes_ns']['median_us']:,.1f}",
                f"{run['log_episodes_ns']['p99_us']:,.0f}",
                f"{run['log_episodes_ns']['max_us'] / 1000:,.0f}",
                f"{run['slow_calls']:,}",
                f"{run['dropped_records']:,}",
                f"{run['stored']['episodes']:,}",
                _still_spooled(run),
                f"{run['spool_bytes_at_end'] / MIB:.1f}",
            )
            for sdk, run in runs.items()
        ],
    )
    return Section(
        f"spool: ours vs prime-runs 0.1.4 against ~{settings['delay_s']:g} s per POST", notes, tables=[table]
    )


def _still_spooled(run: dict[str, Any]) -> str:
    report = run.get("report")
    if not report:
        return "-"
    return " / ".join(f"{sink['pending']:,}" for sink in report["sinks"])
