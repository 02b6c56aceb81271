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
    "failure_reason",
    "is_ambiguous",
    "is_permanent",
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


#: Answers that refuse the request itself (nothing was stored) and would refuse it again: a record rejection.
REJECTION_STATUSES = frozenset({400, 409, 413, 422})
#: Answers from a gateway in front of the service: the service may have acted before it failed.
GATEWAY_STATUSES = frozenset({502, 503, 504})


def is_record_rejection(exc: BaseException) -> bool:
    """True when the error costs only the records of the request that caused it (the sink stays enabled): the
    platform refused them for good (400, 409, 413, 422), or they cannot be encoded. Never worth a resend."""
    if isinstance(exc, (TypeError, ValueError, TraceTooLargeError, ValidationRejectedError, LineFormatConflictError)):
        return True
    return (
        isinstance(exc, APIError)
        and not isinstance(exc, (RetryableAPIError, TransportError))
        and exc.status_code in REJECTION_STATUSES
    )


def is_ambiguous(error: BaseException) -> bool:
    """Whether the server may have acted although the call failed: a transport failure
    after the request went out, or a 502/503/504. Any other answer (429, a 4xx, a plain 500) refused the request,
    and an error raised before sending (an unencodable body) sent nothing. Unknown failures count as ambiguous."""
    ambiguous = getattr(error, "ambiguous", None)
    if isinstance(ambiguous, bool):
        return ambiguous
    if isinstance(error, (TypeError, ValueError)):
        return False
    if isinstance(error, APIError) and error.status_code is not None and not isinstance(error, TransportError):
        return error.status_code in GATEWAY_STATUSES
    return True


def is_transient(exc: BaseException) -> bool:
    """True for failures worth a strike rather than retirement: 429/5xx after retries (a plain 500 too) and
    transport errors."""
    if isinstance(exc, (RetryableAPIError, TransportError)):
        return True
    return isinstance(exc, APIError) and exc.status_code is not None and exc.status_code >= 500


def is_permanent(error: BaseException) -> bool:
    """True when a sink cannot go on after the error: neither a record rejection nor a transient failure."""
    return not (is_record_rejection(error) or is_transient(error))


def failure_reason(error: BaseException) -> str:
    """A short reason naming the kind of problem, for the report's per-sink ``failure_reasons``."""
    if isinstance(error, TraceTooLargeError):
        return "trace too large"
    if isinstance(error, (TypeError, ValueError)):
        return f"unencodable record: {type(error).__name__}"
    if isinstance(error, TransportError):
        # The client's error wraps the transport's own (ConnectError, ReadTimeout, ...), which says more.
        return f"transport error: {type(error.__cause__ or error).__name__}"
    status = getattr(error, "status_code", None)
    if isinstance(error, APIError) and status is not None:
        code = f" {error.code}" if error.code else ""
        kind = "rejected by the platform" if is_record_rejection(error) else "platform error"
        return f"{kind}: {status}{code}"
    return type(error).__name__
