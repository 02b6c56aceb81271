"""The memory workload: a long training loop through both SDKs, resident memory every window of steps.

A training run outlives everything else the SDK does (days, tens of thousands of steps, in the trainer's own
process). Each child runs a training loop that makes ``per_step`` fresh verifiers episodes every step (as a
trainer does: a backlog keeps them alive), logs them and one metrics row, as fast as it can (``pause_s`` adds
the trainer's own work per step). The account is outside the Prime Traces beta, so both SDKs write a Parquet
object of every 10th step's episodes and every metrics row (ours with ``sinks="legacy"``). Every ``window``
steps the child samples RSS, peak RSS, Arrow's memory pool and (ours) what its uploaders hold. Reported: the
table per window side by side, ours/0.1.4 peak RSS, and whether ours stays flat after the warm-up.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._eval import SDKS
from benchmarks._harness import Harness
from benchmarks._report import Metric, Section, Table, Target, compare, errors_note
from benchmarks._stats import slope

MIB = 1024 * 1024
#: The child's timeout per step: 10 to 20 ms measured on 2 cores, with a wide margin.
TIMEOUT_PER_STEP_SECONDS = 0.1
#: Flat after the warm-up: over the second half of the steps RSS may grow this much per 1,000 steps. RSS moves by
#: about a MiB from window to window; the spool's index of every logged record costs about 0.2 KiB a step.
FLAT_KIB_PER_1000_STEPS = 1024.0


@dataclass(frozen=True)
class MemorySettings:
    steps: int
    per_step: int
    window: int
    pause_s: float
    rounds: int


def run_memory(harness: Harness, scratch: Path, settings: MemorySettings) -> dict[str, Any]:
    """Both SDKs, alternating which goes first each round, on a traces-disabled account; each child's
    PRIME_RUNS_DIR (ours keeps its spool there) is in ``scratch`` and deleted once measured."""
    harness.account(False)
    runs: dict[str, list[dict[str, Any]]] = {sdk: [] for sdk in SDKS}
    try:
        for round_index in range(settings.rounds):
            for sdk in SDKS if round_index % 2 == 0 else SDKS[::-1]:
                spec: dict[str, Any] = {
                    "sdk": sdk,
                    "workload": "memory",
                    "steps": settings.steps,
                    "per_step": settings.per_step,
                    "window": settings.window,
                    "pause_s": settings.pause_s,
                }
                if sdk == "ours":
                    spec["sinks"] = "legacy"  # like 0.1.4 outside the beta: the Parquet table and metrics only
                print(
                    f"  memory round {round_index + 1}/{settings.rounds} {sdk}: {settings.steps:,} steps ...",
                    flush=True,
                )
                runs_dir = scratch / f"memory-{sdk}"
                try:
                    result = harness.run(
                        spec,
                        timeout=120 + settings.steps * TIMEOUT_PER_STEP_SECONDS,
                        env={"PRIME_RUNS_DIR": str(runs_dir)},
                    )
                finally:
                    shutil.rmtree(runs_dir, ignore_errors=True)
                runs[sdk].append(result)
                print(f"  memory {sdk}: {_brief(result)}", flush=True)
    finally:
        harness.account(True)
    return {"settings": vars(settings), "runs": runs}


def _brief(result: dict[str, Any]) -> str:
    stored = result["stored"]
    return (
        f"wall {result['wall_s']:.0f}s peak RSS {result['peak_rss_kib'] / 1024:.0f} MiB, "
        f"metric rows {stored['metric_rows']}, sample rows {stored['sample_rows']}"
    )


def rss_slope_kib_per_1000(run: dict[str, Any]) -> float | None:
    """Least-squares growth of RSS over the second half of the windows, KiB per 1,000 steps."""
    windows = run["windows"]
    if len(windows) < 3:
        return None
    late = windows[len(windows) // 2 - 1 :]
    return slope([(w["step"], w["rss_kib"]) for w in late]) * 1000


MEMORY_METRICS = (
    Metric("peak RSS (MiB)", lambda r: r["peak_rss_kib"] / 1024, 1, Target("<= 1.00x", ratio_at_most=1.0)),
    Metric("RSS at the last window (MiB)", lambda r: r["windows"][-1]["rss_kib"] / 1024, 1),
    Metric("RSS before init (MiB)", lambda r: r["rss_before_init_kib"] / 1024, 1),
    Metric(
        "RSS growth, 2nd half (KiB/1,000 steps)",
        rss_slope_kib_per_1000,
        0,
        Target(f"ours < {FLAT_KIB_PER_1000_STEPS:.0f}", ours_below=FLAT_KIB_PER_1000_STEPS),
    ),
    Metric("log_episodes(step batch) median (us)", lambda r: r["log_episodes_ns"]["median_us"], 1),
    Metric("log_episodes(step batch) p99 (us)", lambda r: r["log_episodes_ns"]["p99_us"], 0),
    Metric("log_metrics(row, step=s) median (us)", lambda r: r["log_metrics_ns"]["median_us"], 1),
    Metric("time inside the log calls (s)", lambda r: r["logging_s"], 1),
    Metric("metric rows stored", lambda r: r["stored"]["metric_rows"], 0),
    Metric("training sample rows stored", lambda r: r["stored"]["sample_rows"], 0),
    Metric("records dropped", lambda r: r["dropped_records"], 0),
    Metric("records spilled to the spool", lambda r: r["windows"][-1]["spilled_records"], 0),
    Metric("spool on disk at the end (MiB)", lambda r: r["spool_bytes_at_end"] / MIB, 1),
    Metric("CPU init -> finish (s)", lambda r: r["cpu_s"], 1),
    Metric("wall init -> finish returned (s)", lambda r: r["wall_s"], 1),
)


def memory_section(results: dict[str, Any]) -> Section:
    settings, runs = results["settings"], results["runs"]
    theirs, ours = runs["prime-runs"], runs["ours"]
    pause = f"{settings['pause_s'] * 1000:g} ms of the trainer's own work" if settings["pause_s"] else "no pause"
    notes = [
        f"{settings['steps']:,} steps x {settings['per_step']} fresh train episodes (made every step), "
        f"log_episodes(batch) then log_metrics(row, step=s), {pause} per step; traces-disabled account: both write "
        'a Parquet object every 10th step and every metrics row (ours sinks="legacy"); metrics rate limit lifted. '
        f"One fresh process per SDK and round ({settings['rounds']} rounds, alternating order); per window the "
        "median over rounds.",
        *_arrow_note(ours),
        *errors_note(theirs + ours),
    ]
    return Section(
        "memory (training soak): prime-runs 0.1.4 vs ours, RSS every "
        f"{settings['window']:,} steps over {settings['steps']:,} steps",
        notes,
        compare(MEMORY_METRICS, theirs, ours),
        tables=[_window_table(theirs, ours)],
    )


def _arrow_note(ours: Sequence[dict[str, Any]]) -> list[str]:
    after = [run["arrow_after_finish"] for run in ours if run.get("arrow_after_finish")]
    peaks = [w["arrow_peak_bytes"] for run in ours for w in run["windows"]]
    if not after or not peaks:
        return []
    return [
        f"Ours, Arrow's memory pool ({after[0]['arrow_pool']}): at most {max(peaks) / 1024:,.0f} KiB allocated at "
        f"once, {max(a['arrow_bytes'] for a in after):,} bytes after finish (every Parquet buffer is released "
        "with its upload)."
    ]


def _window_table(theirs: Sequence[dict[str, Any]], ours: Sequence[dict[str, Any]]) -> Table:
    steps = [w["step"] for w in ours[0]["windows"]] if ours else []

    def at(runs: Sequence[dict[str, Any]], index: int, value: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(value(run["windows"][index]) for run in runs)

    cells: list[tuple[str, ...]] = []
    for index, step in enumerate(steps):
        their_peak = at(theirs, index, lambda w: w["peak_rss_kib"]) / 1024
        our_peak = at(ours, index, lambda w: w["peak_rss_kib"]) / 1024
        cells.append(
            (
                f"{step:,}",
                f"{at(theirs, index, lambda w: w['rss_kib']) / 1024:.0f}",
                f"{their_peak:.0f}",
                f"{at(ours, index, lambda w: w['rss_kib']) / 1024:.0f}",
                f"{our_peak:.0f}",
                f"{our_peak / their_peak:.2f}x",
                f"{at(ours, index, lambda w: w['queued_records']):,.0f}",
                f"{at(ours, index, lambda w: w['held_bytes']) / 1024:,.0f}",
            )
        )
    return Table(
        (
            "step",
            "0.1.4 RSS MiB",
            "0.1.4 peak MiB",
            "ours RSS MiB",
            "ours peak MiB",
            "peak ours/0.1.4",
            "ours queued records",
            "ours held KiB",
        ),
        cells,
    )
