"""What a long sync says while it works: one line on stderr at most every few seconds, and the line an
interrupted sync ends with (what it sent, and how to resume)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

#: Seconds between two progress lines; a sync shorter than this prints none.
PROGRESS_SECONDS = 5.0


def describe_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items() if count) or "nothing yet"


class SyncProgress:
    """Told after every request what was sent so far; prints when :data:`PROGRESS_SECONDS` passed since the last
    line (or the start)."""

    def __init__(
        self,
        folder: str,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float | None = None,
    ) -> None:
        self._folder = folder
        self._stream = stream
        self._clock = clock
        self._interval = PROGRESS_SECONDS if interval is None else interval
        self._last = clock()

    def update(self, counts: Mapping[str, int], requests: int, retries: int) -> None:
        now = self._clock()
        if now - self._last < self._interval:
            return
        self._last = now
        retried = f", {retries} retried" if retries else ""
        print(
            f"prime-otel sync {self._folder}: sent {describe_counts(counts)} ({requests} requests{retried})",
            file=self._stream or sys.stderr,
            flush=True,
        )


def interrupted_line(folder: str, counts: Mapping[str, int], requests: int) -> str:
    """The one line an interrupted sync prints: nothing it sent is sent again by the next one."""
    return (
        f"prime-otel sync: interrupted; sent {describe_counts(counts)} in {requests} requests. Run "
        f"'prime-otel sync {folder}' again to send the rest (what was sent, or may have been, is not sent twice)."
    )
