"""Run-level aggregates over episodes in the shape the eval dashboard reads:
the aggregation verifiers used, so migrated runs keep their numbers. Pass the result to
``run.finish(summary=...)``; NaN passes through here and is dropped by summary cleaning.

Every kind of record ``run.log_episodes`` accepts works here: verifiers objects, mappings (JSON records,
``Episode.to_record()``) and any object with ``to_record()``. A mapping's trace reward is its ``reward`` key when
present, else the weighted sum of its rewards' scores, as verifiers computes ``Trace.reward``.

Improvement over prime-runs 0.1.4: a trace whose ``reward`` is None, or a reward whose ``score`` is None, is
skipped (left out of that mean's count) instead of raising ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

_ABSENT = object()


class RunSummary(TypedDict):
    avg_reward: float
    avg_metrics: dict[str, float]
    avg_error: float


def _field(item: Any, name: str, default: Any = None) -> Any:
    """``name`` of a record in any accepted shape: a mapping's key, an object's attribute, else its ``to_record()``."""
    if isinstance(item, Mapping):
        return item.get(name, default)
    value = getattr(item, name, _ABSENT)
    if value is not _ABSENT:
        return value
    to_record = getattr(item, "to_record", None)
    if callable(to_record):
        record = to_record()
        if isinstance(record, Mapping):
            return record.get(name, default)
    return default


def _scores(trace: Any) -> dict[str, Any]:
    """Each named reward's score, leaving out a missing reward or score."""
    rewards = _field(trace, "rewards") or {}
    return {
        name: score
        for name, item in rewards.items()
        if item is not None and (score := _field(item, "score")) is not None
    }


def _reward(trace: Any) -> Any:
    """The trace's reward, or None when it has none; the weighted sum of its scores when it states none."""
    try:
        stated = _field(trace, "reward", _ABSENT)
    except TypeError:  # verifiers' Trace.reward multiplies a score of None
        stated = _ABSENT
    if stated is not _ABSENT:
        return stated
    rewards = _field(trace, "rewards") or {}
    total = 0.0
    for item in rewards.values():
        score = None if item is None else _field(item, "score")
        if score is not None:
            weight = _field(item, "weight", 1.0)
            total += score * (1.0 if weight is None else weight)
    return total


def _trainable(trace: Any) -> bool:
    agent = _field(trace, "agent")
    return bool(agent is not None and _field(agent, "trainable", False))


def from_episodes(episodes: Sequence[Any], traces: Iterable[Any] | None = None) -> RunSummary:
    """Means over the trainable traces (a judge or modelled user would dilute every mean with structural
    zeros), over all traces when none is trainable. ``traces`` defaults to every episode's members.
    A metric overrides a reward of the same name; each name averages over the traces reporting it.
    ``avg_error`` is the share of episodes that are not ok."""
    episodes = list(episodes)
    if traces is None:
        members = [trace for episode in episodes for trace in (_field(episode, "traces") or ())]
    else:
        members = list(traces)
    scored = [trace for trace in members if _trainable(trace)] or members

    reward_sum = 0.0
    rewarded = 0
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for trace in scored:
        reward = _reward(trace)
        if reward is not None:
            reward_sum += reward
            rewarded += 1
        values = _scores(trace)
        for name, value in (_field(trace, "metrics") or {}).items():
            if value is not None:
                values[name] = value
        for name, value in values.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1

    failed = sum(not _field(episode, "ok", True) for episode in episodes)
    return {
        "avg_reward": reward_sum / rewarded if rewarded else 0.0,
        "avg_metrics": {name: total / counts[name] for name, total in sums.items()},
        "avg_error": failed / len(episodes) if episodes else 0.0,
    }
