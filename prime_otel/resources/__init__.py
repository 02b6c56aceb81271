"""The run as an OpenTelemetry Resource, and the ``PRIME_RUN_ID`` advertisement children inherit."""

from __future__ import annotations

from ._advertisement import (
    RUN_ID_ENV,
    RUN_KIND_ENV,
    RUN_OWNER_PID_ENV,
    InheritedRun,
    inherited_run,
)
from ._detector import PrimeRunResourceDetector
from ._identity import RunIdentity, detect_rank, run_resource

__all__ = [
    "RUN_ID_ENV",
    "RUN_KIND_ENV",
    "RUN_OWNER_PID_ENV",
    "InheritedRun",
    "PrimeRunResourceDetector",
    "RunIdentity",
    "detect_rank",
    "inherited_run",
    "run_resource",
]
