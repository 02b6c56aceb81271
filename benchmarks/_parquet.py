"""Parquet encoding of training steps, in-process: prime_runs.projection vs prime_otel.projection, best of N."""

from __future__ import annotations

import gc
import io
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from benchmarks._report import Row, Section

RUN_ID = "cmf0x7r2k000108l4a9b2c3d4"
Encoder = Callable[..., "bytes | None"]


def _encode_steps(encode: Encoder, batches: Sequence[Sequence[Any]]) -> list[bytes | None]:
    return [encode(batch, RUN_ID, step) for step, batch in enumerate(batches, start=1)]


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``work``."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def _rows(payloads: Sequence[bytes | None]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(io.BytesIO(p)).num_rows for p in payloads if p is not None)


def run_parquet(batches: Sequence[Sequence[Any]], rounds: int) -> dict[str, Any]:
    """Per-step tables (one call per step, as the training samples sink encodes) and one table of them all."""
    from prime_runs import projection as released

    from prime_otel import projection as ours

    episodes = [episode for batch in batches for episode in batch]
    encoders: dict[str, Encoder] = {
        "prime-runs": released.episodes_to_parquet_bytes,
        "ours": ours.episodes_to_parquet_bytes,
    }
    results: dict[str, Any] = {"episodes": len(episodes), "steps": len(batches), "rounds": rounds}
    shapes: dict[str, Callable[[Encoder], list[bytes | None]]] = {
        "per_step": lambda encode: _encode_steps(encode, batches),
        "one_table": lambda encode: [encode(episodes, RUN_ID, 10)],
    }
    for shape, work in shapes.items():
        walls: dict[str, list[float]] = {sdk: [] for sdk in encoders}
        cpus: dict[str, list[float]] = {sdk: [] for sdk in encoders}
        for round_index in range(rounds):
            order = list(encoders) if round_index % 2 == 0 else list(encoders)[::-1]
            for sdk in order:
                wall, cpu = _timed(partial(work, encoders[sdk]))
                walls[sdk].append(wall)
                cpus[sdk].append(cpu)
        results[shape] = {
            "timings": {sdk: {"wall_s": min(walls[sdk]), "cpu_s": min(cpus[sdk])} for sdk in encoders},
            "rows": {sdk: _rows(work(encode)) for sdk, encode in encoders.items()},
        }
    return results


def parquet_section(results: dict[str, Any]) -> Section:
    per_thousand = 1000 / results["episodes"] * 1000  # seconds for the workload -> ms per 1,000 episodes
    rows = []
    for shape, label in (("per_step", "per-step tables"), ("one_table", "one table")):
        timings = results[shape]["timings"]
        for clock, clock_label in (("wall_s", "wall"), ("cpu_s", "CPU")):
            rows.append(
                Row(
                    f"{label}, {clock_label} ms / 1,000 episodes",
                    timings["prime-runs"][clock] * per_thousand,
                    timings["ours"][clock] * per_thousand,
                    1,
                    None,
                )
            )
    notes = [
        f"episodes_to_parquet_bytes over {results['episodes']} train episodes: {results['steps']} per-step calls "
        f"(as the training samples sink encodes), and the same episodes as one table; in-process, best of "
        f"{results['rounds']} alternating rounds.",
        "rows written (per-step / one table): "
        + ", ".join(
            f"{sdk} {results['per_step']['rows'][sdk]} / {results['one_table']['rows'][sdk]}"
            for sdk in ("prime-runs", "ours")
        ),
    ]
    return Section("Parquet encoding (training samples)", notes, rows)
