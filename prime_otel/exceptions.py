"""prime-runs 0.1.4's ``prime_runs.exceptions``: the same names, from :mod:`prime_otel.errors`.

SDK-local errors derive from :class:`PrimeRunsError`; platform and transport errors are the ``prime-traces``
exception family, the same classes 0.1.4 raises, so ``except`` clauses written for either SDK catch both.
"""

from __future__ import annotations

from .errors import (
    APIError,
    APITimeoutError,
    ConfigurationError,
    EnvironmentResolutionError,
    ForbiddenError,
    LineFormatConflictError,
    NotFoundError,
    PaymentRequiredError,
    PrimeRunsError,
    RetryableAPIError,
    RunFinishedError,
    TraceTooLargeError,
    TransportError,
    UnauthorizedError,
    ValidationRejectedError,
    is_record_rejection,
    is_transient,
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
    "RetryableAPIError",
    "RunFinishedError",
    "TraceTooLargeError",
    "TransportError",
    "UnauthorizedError",
    "ValidationRejectedError",
    "is_record_rejection",
    "is_transient",
]
