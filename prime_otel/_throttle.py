"""Warnings that a hot loop can trigger on every call (a ``flush(timeout=0)`` loop, a queue that stays full)
are logged at most once per interval per kind, with how many were held back since the last one."""

from __future__ import annotations

import logging
import threading
import time

DEFAULT_INTERVAL_SECONDS = 10.0


class ThrottledWarning:
    """One kind of repeated warning: the first is logged, then at most one per ``interval`` seconds."""

    def __init__(self, logger: logging.Logger, interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
        self._logger = logger
        self._interval = interval
        self._lock = threading.Lock()
        self._last: float | None = None
        self._held_back = 0

    def warn(self, message: str, *args: object) -> bool:
        """Logs ``message % args`` unless one was logged less than ``interval`` ago; True when it was logged."""
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < self._interval:
                self._held_back += 1
                return False
            held_back, self._held_back, self._last = self._held_back, 0, now
        if held_back:
            message += " (%d more like this in the last %.0f s were not logged)"
            args = (*args, held_back, self._interval)
        self._logger.warning(message, *args)
        return True

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
