"""prime-otel: Prime platform runs (evals and training) built on OpenTelemetry."""

from __future__ import annotations

from . import exceptions, metrics, models, projection
from ._logger_names import nest_under_prime_runs
from ._types import CONFIG_SOURCE_KEY, ConfigSource, EnvironmentRef, RunKind, RunMode, RunStatus, TrainingSpec
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

nest_under_prime_runs()

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
    "RunMode",
    "RunStatus",
    "SinkReport",
    "TrainingSpec",
    "TransportError",
    "UnauthorizedError",
    "WorkerTally",
    "exceptions",
    "init",
    "join",
    "metrics",
    "models",
    "projection",
]
