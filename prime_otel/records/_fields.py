"""Reading a record's fields alike from a producer's object (a verifiers model) and from its JSON mapping: its
``run.work`` step, the step of a training run's work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._metric_values import step_number

__all__ = ["field_of", "training_step", "work_step"]


def field_of(value: Any, name: str) -> Any:
    """``value[name]`` of a mapping, ``value.name`` of an object; None when absent."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def work_step(record: Any) -> int | None:
    """The step a record's work was dispatched at (``run.work.step``), whatever the run; None without one, or when
    it is no step (the metrics step's rule, ``step_number``: an integer from 0 to 2**53 - 1)."""
    return step_number(field_of(field_of(field_of(record, "run"), "work"), "step"))


def training_step(record: Any) -> int | None:
    """The dispatch step of a training run's work (``run`` and ``run.work`` of type train), else None."""
    run = field_of(record, "run")
    if field_of(run, "type") != "train" or field_of(field_of(run, "work"), "type") != "train":
        return None
    return work_step(record)
