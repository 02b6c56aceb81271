"""The benchmark workloads' records: real verifiers 0.4.0 episodes from the examples' generator."""

from __future__ import annotations

import copy
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EVAL_FIXTURES = ROOT / "tests" / "fixtures" / "eval"
TRAIN_RUN_NAME = "bench-train"


def eval_episodes(count: int) -> list[Any]:
    """``count`` eval episodes (varied from the fixture episodes)."""
    return _make_episodes(count, "eval")


def train_steps(steps: int, per_step: int) -> list[list[Any]]:
    """``steps`` batches of ``per_step`` train episodes, each stamped with its dispatch step (1-based)."""
    from verifiers.v1.episode import PolicySpan, TrainRunInfo, TrainWorkInfo

    episodes = _make_episodes(steps * per_step, "train")
    batches = []
    for step in range(1, steps + 1):
        batch = episodes[(step - 1) * per_step : step * per_step]
        work = TrainWorkInfo(step=step, policy=PolicySpan(start=max(0, step - 1), end=step))
        for episode in batch:
            episode.record_run(TrainRunInfo(id=TRAIN_RUN_NAME, name=TRAIN_RUN_NAME, work=work))
        batches.append(batch)
    return batches


def train_batch(step: int, per_step: int) -> list[Any]:
    """One step's ``per_step`` fresh train episodes dispatched at ``step`` (a training loop makes new ones every
    step, so a long run never holds more than what the SDK keeps)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    from _episodes import make_episodes

    return list(make_episodes(per_step, kind="train", seed=step, step=step))


def _make_episodes(count: int, kind: str) -> list[Any]:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    from _episodes import make_episodes

    return list(make_episodes(count, kind=kind))


@cache
def _fixture_records() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads((EVAL_FIXTURES / f"episode-{n}.json").read_text(encoding="utf-8")) for n in (1, 2, 3))


def json_episode(index: int) -> dict[str, Any]:
    """A JSON episode record (``Episode.to_record()``) made on the fly: a fixture record with ids unique per
    ``index``, so a long run never holds more than the one it is logging."""
    record = copy.deepcopy(_fixture_records()[index % 3])
    record["id"] = f"ep{index:08d}"
    for position, trace in enumerate(record["traces"]):
        trace["id"] = f"tr{index:08d}{position}"
    return record
