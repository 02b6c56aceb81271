"""Turning HTTP outcomes into the prime-traces exception family and deciding what may be retried.

A failure is *ambiguous* when the server may already have acted on the request (a 502/503/504 answer, a broken
stream, a read timeout): replaying it is only safe for idempotent calls. Unambiguous failures (nothing reached the
server, or a 429 refusal) may be replayed for every call. Any other answer (a 4xx, a plain 500) is unambiguous too,
but not retried here: the sinks decide what to do with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ..errors import (
    APIError,
    APITimeoutError,
    ForbiddenError,
    LineFormatConflictError,
    NotFoundError,
    PaymentRequiredError,
    RetryableAPIError,
    TraceNotIndexedError,
    TransportError,
    UnauthorizedError,
    ValidationRejectedError,
)

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
RETRY_AFTER_CAP_SECONDS = 60.0
BACKOFF_CAP_SECONDS = 30.0
_MESSAGE_LIMIT = 500

# Raised before a byte of the request left this process.
_UNAMBIGUOUS_TRANSPORT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.ProxyError,
    httpx.UnsupportedProtocol,
)

_STATUS_ERRORS: dict[int, type[APIError]] = {
    400: ValidationRejectedError,
    402: PaymentRequiredError,
    403: ForbiddenError,
    404: NotFoundError,
}


class PlatformTransportError(TransportError):
    """A transport failure that records whether the request may have reached the server."""

    def __init__(self, message: str, *, ambiguous: bool) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous


class PlatformTimeoutError(APITimeoutError):
    """A timeout that records whether the request may have reached the server."""

    def __init__(self, message: str, *, ambiguous: bool) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous


def transport_failure(exc: httpx.RequestError, what: str) -> APIError:
    """The typed error for an httpx exception; redirect loops are permanent, never transient."""
    if isinstance(exc, httpx.TooManyRedirects):
        return APIError(f"{what} failed: too many redirects")
    ambiguous = not isinstance(exc, _UNAMBIGUOUS_TRANSPORT)
    message = f"{what} failed: {type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return PlatformTimeoutError(message, ambiguous=ambiguous)
    return PlatformTransportError(message, ambiguous=ambiguous)


def extract_error(response: httpx.Response) -> tuple[str | None, str]:
    """``(code, message)``: ``error.code``/``error.message``, else ``detail``, else the raw text or ``HTTP <s>``."""
    text = response.text.strip()
    try:
        body: Any = json.loads(response.content) if response.content else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and (error.get("code") or error.get("message")):
            code = error.get("code")
            return (str(code) if code else None), str(error.get("message") or code)
        if "detail" in body:
            detail = body["detail"]
            return None, detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)
    return None, text[:_MESSAGE_LIMIT] if text else f"HTTP {response.status_code}"


def error_for_response(response: httpx.Response) -> APIError:
    """The prime-traces family exception a non-2xx platform response maps to, chosen by status code."""
    status = response.status_code
    code, message = extract_error(response)
    if status == 401:
        detail = "" if message == f"HTTP {status}" else f" ({message})"
        text = f"API key unauthorized{detail}; check PRIME_API_KEY and its scopes"
        return UnauthorizedError(text, status_code=status, code=code)
    if status == 409:
        conflict = TraceNotIndexedError if code == "trace_not_indexed" else LineFormatConflictError
        return conflict(message, status_code=status, code=code)
    if status in RETRYABLE_STATUSES:
        return RetryableAPIError(
            f"HTTP {status}: {message}", status_code=status, code=code, retry_after=retry_after_seconds(response)
        )
    error_type = _STATUS_ERRORS.get(status)
    if error_type is not None:
        return error_type(message, status_code=status, code=code)
    return APIError(f"HTTP {status}: {message}", status_code=status, code=code)


def retry_after_seconds(response: httpx.Response, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds (negative or NaN ⇒ 0) or an HTTP-date; unparseable ⇒ None."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return _seconds_until(value, now or datetime.now(timezone.utc))
    return 0.0 if math.isnan(seconds) else max(0.0, seconds)


def _seconds_until(http_date: str, now: datetime) -> float | None:
    try:
        target = parsedate_to_datetime(http_date)
    except (TypeError, ValueError, OverflowError):
        return None
    if target.tzinfo is None:
        target = target.replace(tzinfo=timezone.utc)
    return max(0.0, (target - now).total_seconds())


def backoff_seconds(attempt: int, random: Callable[[], float], retry_after: float | None = None) -> float:
    """Wait before retry ``attempt`` (0-based): ``Retry-After`` capped at 60 s, else ``min(30, 2^i) * [0.5, 1.5)``."""
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP_SECONDS)
    return min(BACKOFF_CAP_SECONDS, 2.0**attempt) * (0.5 + random())
