"""One authenticated httpx client per platform API root, with a per-call retry policy.

Every call declares whether it may be replayed after an *ambiguous* failure (the server may have
acted): by default every method but POST; a POST opts in with ``idempotent=True``. Unambiguous
failures (connect errors, 429) are replayed for every call; a plain 500 never is.
"""

from __future__ import annotations

import json
import logging
import random as _random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import httpx
from opentelemetry import context as otel_context

from .._attempts import ATTEMPT_LISTENER, REQUEST_METER, SENDER_WAIT
from .._version import __version__
from ..errors import APIError, RetryableAPIError, TransportError, is_ambiguous
from ._failures import backoff_seconds, error_for_response, transport_failure
from ._transport import transport_for
from ._urls import ApiRoot, split_api_root, strip_config_url

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
#: Sample batches and storage objects are megabytes.
UPLOAD_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
MAX_ATTEMPTS = 5


def _instrumentation_suppressor() -> Callable[[], AbstractContextManager[None]] | None:
    try:
        from opentelemetry.instrumentation.utils import suppress_instrumentation
    except ImportError:  # only opentelemetry-api is a hard dependency
        return None
    return suppress_instrumentation


_suppress_instrumentation = _instrumentation_suppressor()


@contextmanager
def suppressed_instrumentation() -> Iterator[None]:
    """Keep an instrumented httpx from turning our own uploads into spans that are uploaded again."""
    if _suppress_instrumentation is not None:
        with _suppress_instrumentation():
            yield
        return
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        yield
    finally:
        otel_context.detach(token)


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON; NaN/±inf raise ``ValueError`` here instead of an opaque 400 from the server."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def decode_response(response: httpx.Response, what: str) -> dict[str, Any]:
    """A 2xx body as an object: empty ⇒ ``{}``, a non-object ⇒ ``{"data": value}``, non-JSON ⇒ permanent error."""
    if not response.content:
        return {}
    try:
        payload = json.loads(response.content)
    except ValueError:
        raise APIError(f"{what} returned non-JSON ({response.status_code}): {response.text[:200]!r}") from None
    return payload if isinstance(payload, dict) else {"data": payload}


def user_agent() -> str:
    python = ".".join(str(part) for part in sys.version_info[:3])
    return f"prime-otel/{__version__} python/{python}"


@contextmanager
def metered_requests(meter: Callable[[int], None]) -> Iterator[None]:
    """Within the block, every HTTP attempt on this thread (successful or not) is told to ``meter`` with its body
    size: what a sink's report counts as its requests and bytes."""
    token = REQUEST_METER.set(meter)
    try:
        yield
    finally:
        REQUEST_METER.reset(token)


def meter_request(request: httpx.Request) -> None:
    """An httpx request hook: tells the metered block's meter about an attempt of a client that is not ours."""
    meter = REQUEST_METER.get()
    if meter is not None:
        meter(int(request.headers.get("content-length") or 0))


class RequestCounters:
    """Attempts sent and request-body bytes, for a delivery report; safe to bump from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes_sent = 0

    def count(self, body: bytes | None) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_sent += len(body) if body else 0

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()


class LazyClient:
    """An httpx client built on first use. A forked child forgets it without closing it: closing would send
    ``close_notify`` down a socket the parent still reads."""

    def __init__(self, factory: Callable[[], httpx.Client]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None

    def get(self) -> httpx.Client:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
                client = self._client
        return client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._client = None


class PlatformHTTP:
    """The platform client for one API root; the httpx client is built on first use."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        max_attempts: int = MAX_ATTEMPTS,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.root: ApiRoot = split_api_root(strip_config_url(base_url))
        self._max_attempts = max(1, max_attempts)
        self._sleep = sleep
        self._random = random
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": user_agent()}
        if self.root.internal:
            # The internal router authenticates a hosted run's own token from this header.
            self._headers["x-api-key"] = api_key
        self._counters = RequestCounters()
        self._retries = 0
        self._deadline = threading.local()
        self._client = LazyClient(
            lambda: httpx.Client(transport=transport or transport_for(base_url), follow_redirects=True, timeout=timeout)
        )

    @property
    def requests(self) -> int:
        return self._counters.requests

    @property
    def bytes_sent(self) -> int:
        return self._counters.bytes_sent

    @property
    def retries(self) -> int:
        """Attempts that repeated a call after a failure (counted in :attr:`requests` too)."""
        return self._retries

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        idempotent: bool | None = None,
        timeout: httpx.Timeout | None = None,
        absolute_url: bool = False,
        max_attempts: int | None = None,
    ) -> dict[str, Any]:
        """Send one call (retried per its policy) and return its JSON object; ``content`` is an already encoded body.
        ``max_attempts`` lowers this client's attempt limit for one call."""
        method = method.upper()
        body = content if content is not None else (encode_json(json) if json else None)
        url = path if absolute_url else self.root.prefix + path
        replayable = idempotent if idempotent is not None else method != "POST"
        what = f"{method} {path}"
        attempts = self._max_attempts if max_attempts is None else max(1, min(max_attempts, self._max_attempts))
        attempt = 0
        reached = False  # an earlier attempt may have been acted on
        while True:
            try:
                return self._attempt(method, url, body, timeout, what, reached)
            except (RetryableAPIError, TransportError) as error:
                attempt += 1
                reached = reached or is_ambiguous(error)
                if attempt >= attempts or (is_ambiguous(error) and not replayable):
                    raise
                retry_after = error.retry_after if isinstance(error, RetryableAPIError) else None
                delay = backoff_seconds(attempt - 1, self._random, retry_after)
                deadline = getattr(self._deadline, "value", None)
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise
                logger.debug("%s: %s; retrying in %.1f s (attempt %d)", what, error, delay, attempt + 1)
                wait = SENDER_WAIT.get()
                if wait is None:
                    self._sleep(delay)
                elif not wait(delay, self._sleep):
                    raise  # the sender must stop waiting (its run is finishing): this request was not sent
                self._retries += 1

    def _attempt(
        self, method: str, url: str, body: bytes | None, timeout: httpx.Timeout | None, what: str, reached: bool
    ) -> dict[str, Any]:
        listener = ATTEMPT_LISTENER.get()
        if listener is None:
            return self._send(method, url, body, timeout, what)
        listener(True)
        try:
            result = self._send(method, url, body, timeout, what)
        except (RetryableAPIError, TransportError) as error:
            if not reached and not is_ambiguous(error):
                listener(False)
            raise
        return result

    def _send(
        self, method: str, url: str, body: bytes | None, timeout: httpx.Timeout | None, what: str
    ) -> dict[str, Any]:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        client = self._client.get()
        self._counters.count(body)
        meter = REQUEST_METER.get()
        if meter is not None:
            meter(len(body) if body else 0)
        try:
            with suppressed_instrumentation():
                response = client.request(
                    method,
                    url,
                    content=body,
                    headers=headers,
                    timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )
        except httpx.RequestError as exc:
            raise transport_failure(exc, what) from exc
        if not response.is_success:
            raise error_for_response(response)
        return decode_response(response, what)

    @contextmanager
    def retries_until(self, deadline: float) -> Iterator[None]:
        """Within the block, calls on this thread start no retry that would wait past ``deadline`` (monotonic)."""
        previous = getattr(self._deadline, "value", None)
        self._deadline.value = deadline
        try:
            yield
        finally:
            self._deadline.value = previous

    def close(self) -> None:
        self._client.close()

    def reset_after_fork(self) -> None:
        """In a forked child: drop the parent's client unclosed; the next call builds a fresh one."""
        self._counters.reset_after_fork()
        self._client.reset_after_fork()
