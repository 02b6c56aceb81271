"""Loaders for tests/fixtures: the JSON files, and REAL verifiers 0.4.0 objects rebuilt from the records the way
verifiers reloads a run's results (``read_episodes(dir, WireTrace)`` / ``WireEpisode``).

Every call returns fresh objects, so a test may edit what it gets.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any, Literal

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EVAL_RUN_ID = "eval-3f9c2a71d4"
TRAIN_RUN_ID = "cmf0x7r2k000108l4a9b2c3d4"
EPISODE_NUMBERS = (1, 2, 3)

Kind = Literal["eval", "train"]


def fixture_path(*parts: str) -> Path:
    return FIXTURES.joinpath(*parts)


def load_json(*parts: str) -> Any:
    """A fixture file parsed as JSON, e.g. ``load_json("eval", "samples.json")``."""
    return json.loads(fixture_path(*parts).read_text(encoding="utf-8"))


def load_records(kind: Kind) -> list[dict[str, Any]]:
    """The producer records (``Episode.to_record()``) of the three fixture episodes of ``kind``."""
    return [load_json(kind, f"episode-{number}.json") for number in EPISODE_NUMBERS]


def load_stamped(kind: Kind) -> list[dict[str, Any]]:
    """The lines uploaded to Prime Traces for those episodes."""
    return [load_json(kind, f"episode-{number}.stamped.json") for number in EPISODE_NUMBERS]


def load_episodes(kind: Kind) -> list[Any]:
    """verifiers ``WireEpisode`` objects read from the fixture's ``traces.jsonl`` with verifiers' own reader."""
    from verifiers.v1.trace import WireTrace
    from verifiers.v1.utils.trace_store import read_episodes

    return read_episodes(fixture_path(kind), WireTrace)


def episode_from_record(record: dict[str, Any]) -> Any:
    """A verifiers ``WireEpisode`` validated from a (possibly edited) record; NaN/inf floats are accepted."""
    from verifiers.v1.episode import WireEpisode

    return WireEpisode.model_validate(record)


def fresh_records(kind: Kind, count: int) -> list[dict[str, Any]]:
    """``count`` fixture episode records of ``kind`` (cycling through the three) under fresh episode and trace ids,
    so a test can log many distinct episodes."""
    fixtures = load_records(kind)
    made = []
    for number in range(count):
        record = copy.deepcopy(fixtures[number % len(fixtures)])
        record["id"] = uuid.uuid4().hex
        for trace in record["traces"]:
            trace["id"] = uuid.uuid4().hex
        made.append(record)
    return made


def numbered_record(index: int, tag: str = "") -> dict[str, Any]:
    """A fixture eval episode record (what ``Episode.to_record()`` gives) with ids made from ``tag`` and
    ``index``, so the same index names the same episode in a producer and in the test that checks it."""
    fixtures = load_records("eval")
    varied = copy.deepcopy(fixtures[index % len(fixtures)])
    varied["id"] = f"{tag}ep{index:08d}"
    for position, trace in enumerate(varied["traces"]):
        trace["id"] = f"{tag}tr{index:08d}{position}"
    return varied
