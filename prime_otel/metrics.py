"""Run-level aggregates over native episodes in the shape the eval dashboard reads:
the aggregation verifiers used, so migrated runs keep their numbers. Pass the result to
``run.finish(summary=...)``; NaN passes through here and is dropped by summary cleaning.

Improvement over prime-runs 0.1.4: a trace whose ``reward`` is None, or a reward whose ``score`` is None, is
skipped (left out of that mean's count) instead of raising ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict


class RunSummary(TypedDict):
    avg_reward: float
    avg_metrics: dict[str, float]
    avg_error: float


def from_episodes(episodes: Sequence[Any], traces: Iterable[Any] | None = None) -> RunSummary:
    """Means over the trainable traces (a judge or modelled user would dilute every mean with structural
    zeros), over all traces when none is trainable. ``traces`` defaults to every episode's members.
    A metric overrides a reward of the same name; each name averages over the traces reporting it.
    ``avg_error`` is the share of episodes that are not ok."""
    members = [trace for episode in episodes for trace in episode.traces] if traces is None else list(traces)
    scored = [trace for trace in members if trace.agent.trainable] or members

    reward_sum = 0.0
    rewarded = 0
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for trace in scored:
        reward = trace.reward
        if reward is not None:
            reward_sum += reward
            rewarded += 1
        values = {
            name: score
            for name, item in trace.rewards.items()
            if item is not None and (score := item.score) is not None
        }
        for name, value in trace.metrics.items():
            if value is not None:
                values[name] = value
        for name, value in values.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1

    return {
        "avg_reward": reward_sum / rewarded if rewarded else 0.0,
        "avg_metrics": {name: total / counts[name] for name, total in sums.items()},
        "avg_error": sum(not episode.ok for episode in episodes) / len(episodes) if episodes else 0.0,
    }
