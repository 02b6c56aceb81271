"""Reading a record's fields alike from a producer's object (a verifiers model) and from its JSON mapping: its
``run.work`` step, the step of a training run's work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._metric_values import step_number

__all__ = ["field_of", "impossible_training_step", "training_step", "work_step"]


def field_of(value: Any, name: str) -> Any:
    """``value[name]`` of a mapping, ``value.name`` of an object; None when absent."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def work_step(record: Any) -> int | None:
    """The step a record's work was dispatched at (``run.work.step``), whatever the run; None without one, or when
    it is no step (the metrics step's rule, ``step_number``: an integer from 0 to 2**53 - 1)."""
    return step_number(_named_step(record))


def training_step(record: Any) -> int | None:
    """The dispatch step of a training run's work (``run`` and ``run.work`` of type train), else None."""
    return work_step(record) if _training_work(record) else None


def impossible_training_step(record: Any) -> bool:
    """Whether a training run's work names a dispatch step that is no step (negative, 2**53 or more, not an int):
    such an episode belongs to no step object, and is counted failed rather than passed over."""
    if not _training_work(record):
        return False
    step = _named_step(record)
    return step is not None and step_number(step) is None


def _named_step(record: Any) -> Any:
    return field_of(field_of(field_of(record, "run"), "work"), "step")


def _training_work(record: Any) -> bool:
    run = field_of(record, "run")
    return field_of(run, "type") == "train" and field_of(field_of(run, "work"), "type") == "train"
