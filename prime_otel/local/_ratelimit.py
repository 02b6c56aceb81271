"""Per-token sliding-window request limits (evaluation samples, training metrics): 429 with Retry-After beyond."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict, deque

from ._errors import PlatformError

WINDOW_SECONDS = 60.0


class RateLimiter:
    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self._window = window
        self._hits: defaultdict[tuple[str, str], deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def check(self, bucket: str, token: str, limit: int) -> None:
        """Count one request, or raise 429 with ``Retry-After`` when ``limit`` requests already fell in the window.

        A refused request is not counted: it did no work.
        """
        now = time.monotonic()
        with self._lock:
            hits = self._hits[(bucket, token)]
            while hits and hits[0] <= now - self._window:
                hits.popleft()
            if len(hits) < limit:
                hits.append(now)
                return
            wait = hits[0] + self._window - now if hits else self._window
        retry_after = max(1, math.ceil(wait))
        raise PlatformError(
            429,
            f"Rate limit exceeded: {limit} requests per minute",
            headers={"Retry-After": str(retry_after)},
        )
