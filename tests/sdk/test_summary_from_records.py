"""metrics.from_episodes takes every kind of record log_episodes accepts: a run that logs JSON records and
summarises them with from_episodes completes with the same summary as one logging verifiers objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import Kind, load_episodes, load_json, load_records


class _RecordOnly:
    """An object that is a record only through to_record(), as log_episodes accepts."""

    def __init__(self, record: dict[str, Any]) -> None:
        self._record = record

    def to_record(self) -> dict[str, Any]:
        return self._record


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_json_records_summarise_like_the_verifiers_objects(kind: Kind) -> None:
    records = [json.loads(json.dumps(record)) for record in load_records(kind)]
    assert po.metrics.from_episodes(records) == load_json(kind, "summary.json")
    assert po.metrics.from_episodes(load_episodes(kind)) == load_json(kind, "summary.json")


def test_objects_known_only_by_to_record_summarise_like_their_records() -> None:
    records = load_records("eval")
    assert po.metrics.from_episodes([_RecordOnly(record) for record in records]) == load_json("eval", "summary.json")


def test_a_record_reward_is_its_stated_reward_else_the_weighted_scores() -> None:
    episodes = [
        {"id": "a", "ok": True, "traces": [{"agent": {"trainable": True}, "reward": 0.25, "rewards": {}}]},
        {
            "id": "b",
            "ok": False,
            "traces": [
                {
                    "agent": {"trainable": True},
                    "rewards": {"correct": {"score": 1.0, "weight": 0.5}, "format": None, "judge": {"score": None}},
                    "metrics": {"turns": 3.0},
                }
            ],
        },
    ]
    assert po.metrics.from_episodes(episodes) == {
        "avg_reward": (0.25 + 0.5) / 2,
        "avg_metrics": {"correct": 1.0, "turns": 3.0},
        "avg_error": 0.5,
    }


def test_a_run_logging_json_records_completes_with_their_summary(platform_env: LocalPlatform) -> None:
    """The README's "Use it" flow with dict episodes: the run completes and the platform holds the summary."""
    records = load_records("eval")
    with po.init(name="records-eval", environments=["gsm8k"], model="Qwen/Qwen3-8B") as run:
        run.log_episodes(records)
        run.update_summary(po.metrics.from_episodes(records))
    assert run.report.complete
    snapshot = platform_env.inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
    assert snapshot["summary"]["avg_reward"] == pytest.approx(2 / 3)
    assert snapshot["summary"]["avg_error"] == pytest.approx(1 / 3)
