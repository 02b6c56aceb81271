"""Verifiers-shaped episodes for the examples: real verifiers 0.4.0 objects varied from three seed records."""

from __future__ import annotations

import copy
import json
import random
import uuid
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


def _seed_records(kind: str) -> list[dict[str, Any]]:
    lines = (DATA / f"{kind}-episodes.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _vary(record: dict[str, Any], index: int, rng: random.Random, step: int | None) -> dict[str, Any]:
    varied = copy.deepcopy(record)
    varied["id"] = uuid.uuid4().hex
    if step is None:
        varied.pop("run", None)
    else:
        varied["run"]["work"]["step"] = step
    for trace in varied["traces"]:
        trace["id"] = uuid.uuid4().hex
        trace["task"]["data"]["idx"] = index // 4
        for name, reward in list(trace.get("rewards", {}).items()):
            if reward is not None:
                trace["rewards"][name] = {**reward, "score": float(rng.random() < 0.6)}
    return varied


def make_episodes(count: int, *, kind: str = "eval", seed: int = 7, step: int | None = None) -> list[Any]:
    """``count`` episodes as verifiers ``WireEpisode`` objects (four rollouts per example); training episodes
    carry the producer's run block with ``work.step`` set to ``step``."""
    from pydantic import TypeAdapter
    from verifiers.v1 import WireEpisode, WireTrace

    trace_adapter: TypeAdapter[Any] = TypeAdapter(WireTrace)
    rng = random.Random(seed)
    seeds = _seed_records(kind)
    episodes = []
    for index in range(count):
        record = _vary(seeds[index % len(seeds)], index, rng, step)
        episode = WireEpisode.model_validate({**record, "traces": []})
        episode.traces = [trace_adapter.validate_python(trace) for trace in record["traces"]]
        episodes.append(episode)
    return episodes
