"""Errors raised by prime-otel.

Platform and transport errors are the ``prime-traces`` exception family, so one set of
``except`` clauses covers this SDK, ``prime-traces`` and the released ``prime-runs``.
SDK-local errors (raised before any request) derive from :class:`PrimeRunsError`.
"""

from __future__ import annotations

from prime_traces.exceptions import (
    APIError,
    APITimeoutError,
    ForbiddenError,
    LineFormatConflictError,
    NotFoundError,
    PaymentRequiredError,
    PrimeTracesError,
    RetryableAPIError,
    TraceNotIndexedError,
    TraceTooLargeError,
    TransportError,
    UnauthorizedError,
    ValidationRejectedError,
)

__all__ = [
    "APIError",
    "APITimeoutError",
    "ConfigurationError",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "LineFormatConflictError",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "PrimeTracesError",
    "RetryableAPIError",
    "RunFinishedError",
    "TraceNotIndexedError",
    "TraceTooLargeError",
    "TransportError",
    "UnauthorizedError",
    "ValidationRejectedError",
    "is_record_rejection",
    "is_transient",
]


class PrimeRunsError(Exception):
    """Base class of the errors this SDK raises on its own, before any request."""


class ConfigurationError(PrimeRunsError):
    """A setting is missing or invalid."""


class EnvironmentResolutionError(PrimeRunsError):
    """An environment reference could not be resolved to a hub id."""


class RunFinishedError(PrimeRunsError):
    """A logging call reached a run that is finishing or finished."""


def is_record_rejection(error: BaseException) -> bool:
    """True when the error costs only the batch that caused it (the sink stays enabled)."""
    if isinstance(error, (TypeError, ValueError, TraceTooLargeError, ValidationRejectedError, LineFormatConflictError)):
        return True
    return isinstance(error, APIError) and error.status_code in (413, 422) and not isinstance(error, RetryableAPIError)


def is_transient(error: BaseException) -> bool:
    """True for failures worth a strike rather than retirement: 429/5xx after retries, transport errors."""
    return isinstance(error, (RetryableAPIError, TransportError))


def is_permanent(error: BaseException) -> bool:
    """True when a sink cannot go on after the error: neither a record rejection nor a transient failure."""
    return not (is_record_rejection(error) or is_transient(error))
