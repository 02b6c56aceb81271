"""Client-side pacing: a sink sends at most a set number of requests in any window, below the platform's limit.

The platform counts requests per token in a sliding minute (contract: 300 sample appends, 60 metrics rows) and
answers 429 beyond. A sink that paces itself under that count never waits out a ``Retry-After``; the budget below
the limit leaves room for another process on the same token. A pacing wait goes through ``SENDER_WAIT``, so a run
that is finishing gives a request up (as not sent, kept for a replay) instead of waiting past its deadline.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from .._attempts import SENDER_WAIT
from ..errors import RetryableAPIError

WINDOW_SECONDS = 60.0
#: The share of a platform limit one sink uses.
BUDGET_SHARE = 0.9


def paced_requests(limit_per_minute: int) -> int:
    """The requests per window a sink allows itself under a platform limit of ``limit_per_minute``."""
    return max(1, int(limit_per_minute * BUDGET_SHARE))


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
