"""Client-side pacing: a sink starts at most as many requests in any window as the platform's limit allows.

The platform counts requests per token in a sliding minute (contract: 300 sample appends, 60 metrics rows) and
answers 429 beyond. A sink that paces itself to that count never waits out a ``Retry-After`` of its own making; a
429 still comes when other processes share the token, and is waited out as the platform asks. A pacing wait goes
through ``SENDER_WAIT``, so a run that is finishing gives a request up (as not sent, kept for a replay) instead of
waiting past its deadline.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from .._attempts import SENDER_WAIT
from ..errors import RetryableAPIError

_logger = logging.getLogger(__name__)

#: The platform's window is a minute; a sink counts over a second more, so a request that took up to a second to
#: arrive still counts inside the platform's window.
WINDOW_SECONDS = 61.0


def platform_limit(variable: str, default: int) -> int:
    """Requests a minute per token the platform takes on one endpoint: ``default`` (the contract's), or the
    positive integer in the environment variable ``variable`` for a deployment with other limits."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        _logger.warning(
            "%s=%r is not a positive integer; pacing at the platform's %d a minute", variable, text, default
        )
        return default
    return limit


class RequestPacer:
    """At most ``limit`` requests in any ``window`` seconds, counted when each request starts (a burst up to
    ``limit`` goes at once, then one request per freed slot)."""

    def __init__(
        self,
        limit: int,
        window: float = WINDOW_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limit = max(1, limit)
        self.window = window
        self.waited_seconds = 0.0
        self._clock = clock
        self._sleep = sleep
        self._starts: deque[float] = deque()
        self._lock = threading.Lock()

    def delay(self) -> float:
        """Seconds until the next request may start (0: now)."""
        with self._lock:
            return self._delay(self._clock())

    def _delay(self, now: float) -> float:
        while self._starts and self._starts[0] <= now - self.window:
            self._starts.popleft()
        if len(self._starts) < self.limit:
            return 0.0
        return self._starts[0] + self.window - now

    def acquire(self) -> None:
        """Wait for a slot and take it; raises ``RetryableAPIError`` (429, nothing sent) when the sender may not
        wait that long."""
        while True:
            with self._lock:
                now = self._clock()
                wait = self._delay(now)
                if wait <= 0:
                    self._starts.append(now)
                    return
            waiter = SENDER_WAIT.get()
            if waiter is None:
                self._sleep(wait)
            elif not waiter(wait, self._sleep):
                raise RetryableAPIError(
                    "not sent: the run finished before the platform's rate limit allowed another request",
                    status_code=429,
                    code="rate_limited",
                )
            self.waited_seconds += wait

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
