"""prime-runs 0.1.4's ``prime_runs.models``: the value types of the public API, from :mod:`prime_otel._types`."""

from __future__ import annotations

from ._types import (
    CONFIG_SOURCE_KEY,
    MAX_CONFIG_SOURCE_BYTES,
    ConfigSource,
    EnvironmentRef,
    RunKind,
    RunStatus,
    TrainingSpec,
)
from ._types import RunMode as Mode
from .run._containment import OnError

#: The kind a run has unless ``init(kind=)`` says otherwise.
RUN_KIND: RunKind = "eval"

__all__ = [
    "CONFIG_SOURCE_KEY",
    "MAX_CONFIG_SOURCE_BYTES",
    "RUN_KIND",
    "ConfigSource",
    "EnvironmentRef",
    "Mode",
    "OnError",
    "RunKind",
    "RunStatus",
    "TrainingSpec",
]
