"""prime-otel: Prime platform runs (evals and training) built on OpenTelemetry."""

from __future__ import annotations

from ._types import CONFIG_SOURCE_KEY, ConfigSource, EnvironmentRef, RunKind, RunStatus, TrainingSpec
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

__version__ = "0.1.0"

__all__ = [
    "CONFIG_SOURCE_KEY",
    "APIError",
    "ConfigSource",
    "ConfigurationError",
    "EnvironmentRef",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "RetryableAPIError",
    "RunFinishedError",
    "RunKind",
    "RunStatus",
    "TrainingSpec",
    "TransportError",
    "UnauthorizedError",
]
