"""CPU time of prime_otel's record projections against the released prime-runs 0.1.4, per episode.

Run: ``.venv/bin/python benchmarks/bench_projection.py [--repeat N]``. Each scenario runs over the fixture
episodes repeated ``--repeat`` times (default 1000); the best of ``--rounds`` (default 5) alternating rounds of
CPU time (process time) is reported per episode, with the ratio ours / 0.1.4 (target for the uploader paths:
at most 0.5).
Needs the dev extras (prime-runs, verifiers, pyarrow).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prime_runs import metrics as released_metrics
from prime_runs import projection as released
from prime_runs._http import encode_json
from prime_runs.run import _clean_metrics
from prime_runs.sinks.base import stamp_run as released_stamp_run
from verifiers.v1.trace import WireTrace
from verifiers.v1.utils.trace_store import read_episodes

from prime_otel import RunKind, metrics, projection
from prime_otel.client._traces import isal_gzip
from prime_otel.records import clean, encode_record

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
EVAL_ID = "eval-3f9c2a71d4"
TRAIN_ID = "cmf0x7r2k000108l4a9b2c3d4"


def cpu_seconds(theirs: Callable[[], object], ours: Callable[[], object], rounds: int) -> tuple[float, float]:
    """Best CPU time of each over ``rounds`` alternating runs (alternating evens out a busy machine)."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for slot, work in enumerate((theirs, ours)):
            gc.collect()
            start = time.process_time()
            work()
            best[slot] = min(best[slot], time.process_time() - start)
    return best[0], best[1]


def released_samples_upload(episodes: Sequence[Any]) -> None:
    """What 0.1.4's eval samples sink does for one write: project per record, batch, encode each body."""
    numbers: dict[Any, int] = {}
    rows: list[dict[str, Any]] = []
    for episode in episodes:
        rows.extend(released.build_samples([episode], numbers))
    for batch in released.batch_samples(rows):
        encode_json({"samples": batch})


def our_samples_upload(episodes: Sequence[Any], records: Sequence[Any] | None = None) -> None:
    numbers: dict[Any, int] = {}
    samples: list[projection.EncodedSample] = []
    for position, episode in enumerate(episodes):
        record = records[position] if records is not None else None
        samples.extend(projection.encode_episode_samples(episode, numbers, record=record, source=position))
    projection.pack_sample_requests(samples)


def released_traces_lines(episodes: Sequence[Any], run_id: str, kind: RunKind) -> list[Any]:
    return [encode_json(released_stamp_run(episode.to_record(), run_id, kind)) for episode in episodes]


def our_traces_lines(episodes: Sequence[Any], run_id: str, kind: RunKind) -> list[Any]:
    return [encode_record(episode).stamped(run_id, kind) for episode in episodes]


def gzip_each(body: bytes, times: int, compress: Callable[[bytes], bytes]) -> None:
    """``body`` compressed ``times`` times: the same real-shaped bytes, never a body made of repeated copies."""
    for _ in range(times):
        compress(body)


def released_delivery(episodes: Sequence[Any]) -> None:
    """One eval episode written to Prime Traces and to the legacy table (dual write) by 0.1.4's sinks."""
    released_traces_lines(episodes, EVAL_ID, "eval")
    released_samples_upload(episodes)


def our_delivery(episodes: Sequence[Any]) -> None:
    """The same with the record computed and encoded once per episode, shared by both sinks."""
    records = [encode_record(episode) for episode in episodes]
    for record in records:
        record.stamped(EVAL_ID, "eval")
    our_samples_upload(episodes, records)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args(argv)
    repeat = arguments.repeat

    eval_episodes = read_episodes(FIXTURES / "eval", WireTrace) * repeat
    train_episodes = read_episodes(FIXTURES / "train", WireTrace) * repeat
    metrics_row = {"loss": 0.25, "reward": float("nan"), "lr": [1e-5, float("inf")], "perf": {"tps": 1.0}}
    rows = [metrics_row] * len(eval_episodes)
    distinct = read_episodes(FIXTURES / "eval", WireTrace)
    upload_body = b"".join(line + b"\n" for line in our_traces_lines(distinct, EVAL_ID, "eval"))
    scenarios: list[tuple[str, int, Callable[[], object], Callable[[], object]]] = [
        (
            "eval delivery (traces line + v0 row)",
            len(eval_episodes),
            lambda: released_delivery(eval_episodes),
            lambda: our_delivery(eval_episodes),
        ),
        (
            "v0 samples upload (project+pack+encode)",
            len(eval_episodes),
            lambda: released_samples_upload(eval_episodes),
            lambda: our_samples_upload(eval_episodes),
        ),
        (
            "build_samples",
            len(eval_episodes),
            lambda: released.build_samples(eval_episodes),
            lambda: projection.build_samples(eval_episodes),
        ),
        (
            "traces line (record+stamp+encode)",
            len(eval_episodes),
            lambda: released_traces_lines(eval_episodes, EVAL_ID, "eval"),
            lambda: our_traces_lines(eval_episodes, EVAL_ID, "eval"),
        ),
        (
            "Prime Traces upload gzip (zlib 9 / ISA-L 2)",
            len(eval_episodes),
            lambda: gzip_each(upload_body, repeat, lambda body: gzip.compress(body, mtime=0)),
            lambda: gzip_each(upload_body, repeat, isal_gzip),
        ),
        (
            "episodes_to_parquet_bytes",
            len(train_episodes),
            lambda: released.episodes_to_parquet_bytes(train_episodes, TRAIN_ID, 10),
            lambda: projection.episodes_to_parquet_bytes(train_episodes, TRAIN_ID, 10),
        ),
        (
            "from_episodes",
            len(eval_episodes),
            lambda: released_metrics.from_episodes(eval_episodes),
            lambda: metrics.from_episodes(eval_episodes),
        ),
        (
            "clean (metrics row)",
            len(rows),
            lambda: [_clean_metrics(row) for row in rows],
            lambda: [clean(row) for row in rows],
        ),
    ]
    print(f"{'scenario':42} {'0.1.4 us/ep':>12} {'ours us/ep':>12} {'ratio':>7}")
    for name, count, theirs, ours in scenarios:
        released_seconds, our_seconds = cpu_seconds(theirs, ours, arguments.rounds)
        released_time, our_time = released_seconds / count * 1e6, our_seconds / count * 1e6
        print(f"{name:42} {released_time:12.1f} {our_time:12.1f} {our_time / released_time:7.2f}")
    print(json.dumps({"repeat": repeat, "python": sys.version.split()[0]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
