"""Run summary: metrics.from_episodes averages trainable traces (else all), metrics over rewards, per name."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from prime_otel.metrics import from_episodes
from tests._fixtures import Kind, load_json


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_summary_equals_the_fixture(kind: Kind, eval_episodes: list[Any], train_episodes: list[Any]) -> None:
    episodes = eval_episodes if kind == "eval" else train_episodes
    assert from_episodes(episodes) == load_json(kind, "summary.json")


def test_trainable_traces_only_so_a_judge_does_not_dilute(eval_episodes: list[Any]) -> None:
    """Episode 3's judge (trainable false) is left out: avg_reward is over the three solver/agent traces."""
    summary = from_episodes(eval_episodes)
    assert summary["avg_reward"] == pytest.approx(2 / 3)
    assert summary["avg_error"] == pytest.approx(1 / 3)  # episode 2 is not ok


def _trace(reward: Any, rewards: dict[str, Any], metrics: dict[str, Any], trainable: bool = True) -> Any:
    return SimpleNamespace(
        reward=reward,
        rewards={name: None if score is None else SimpleNamespace(score=score) for name, score in rewards.items()},
        metrics=metrics,
        agent=SimpleNamespace(trainable=trainable),
    )


def _episode(*traces: Any, ok: bool = True) -> Any:
    return SimpleNamespace(traces=list(traces), ok=ok)


def test_no_trainable_trace_falls_back_to_all_traces() -> None:
    episodes = [_episode(_trace(1.0, {}, {}, trainable=False), _trace(0.0, {}, {}, trainable=False))]
    assert from_episodes(episodes)["avg_reward"] == 0.5


def test_metrics_override_rewards_and_names_average_over_their_reporters() -> None:
    episodes = [
        _episode(_trace(1.0, {"correct": 1.0, "style": 0.5}, {"style": 0.0, "turns": 2.0})),
        _episode(_trace(0.0, {"correct": 0.0}, {"turns": None}), ok=False),
        _episode(_trace(0.5, {"correct": None}, {"extra": 4.0})),
    ]
    assert from_episodes(episodes) == {
        "avg_reward": 0.5,
        "avg_metrics": {"correct": 0.5, "style": 0.0, "turns": 2.0, "extra": 4.0},
        "avg_error": 1 / 3,
    }


def test_none_reward_or_score_is_skipped_not_raised() -> None:
    """0.1.4 raises TypeError here; the summary skips the missing value (documented improvement)."""
    episodes = [
        _episode(_trace(None, {"correct": None}, {})),
        _episode(_trace(1.0, {"correct": 1.0}, {})),
    ]
    episodes[0].traces[0].rewards["correct"] = SimpleNamespace(score=None)
    assert from_episodes(episodes) == {"avg_reward": 1.0, "avg_metrics": {"correct": 1.0}, "avg_error": 0.0}


def test_explicit_traces_and_empty_input(eval_episodes: list[Any]) -> None:
    judge = eval_episodes[2].traces[1]
    assert from_episodes(eval_episodes, traces=[judge])["avg_reward"] == judge.reward
    assert from_episodes([]) == {"avg_reward": 0.0, "avg_metrics": {}, "avg_error": 0.0}


def test_nan_passes_through_for_summary_cleaning_to_drop() -> None:
    summary = from_episodes([_episode(_trace(float("nan"), {}, {"m": float("inf")}))])
    assert math.isnan(summary["avg_reward"])
    assert summary["avg_metrics"]["m"] == float("inf")
