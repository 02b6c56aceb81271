"""prime-otel: Prime platform runs (evals and training) built on OpenTelemetry."""

from __future__ import annotations

from . import metrics, projection
from ._types import CONFIG_SOURCE_KEY, ConfigSource, EnvironmentRef, RunKind, RunStatus, TrainingSpec
from ._version import __version__ as __version__
from .errors import (
    APIError,
    ConfigurationError,
    EnvironmentResolutionError,
    ForbiddenError,
    NotFoundError,
    PaymentRequiredError,
    PrimeRunsError,
    RetryableAPIError,
    RunFinishedError,
    TransportError,
    UnauthorizedError,
)
from .run import Closure, DeliveryReport, Run, RunHandle, SinkReport, WorkerTally, init, join

MODE_ENV = "PRIME_RUNS_MODE"
TRACES_OPT_OUT_ENV = "PRIME_TRACES_OPT_OUT"

__all__ = [
    "CONFIG_SOURCE_KEY",
    "MODE_ENV",
    "TRACES_OPT_OUT_ENV",
    "APIError",
    "Closure",
    "ConfigSource",
    "ConfigurationError",
    "DeliveryReport",
    "EnvironmentRef",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "RetryableAPIError",
    "Run",
    "RunFinishedError",
    "RunHandle",
    "RunKind",
    "RunStatus",
    "SinkReport",
    "TrainingSpec",
    "TransportError",
    "UnauthorizedError",
    "WorkerTally",
    "init",
    "join",
    "metrics",
    "projection",
]
