"""``on_error``: nothing the platform does escapes into the producer's loop, unless asked to at sync points."""

from __future__ import annotations

import logging
import threading
from typing import Literal

OnError = Literal["warn", "raise"]

_logger = logging.getLogger("prime_otel")


def describe(error: object) -> str:
    return f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)


class ErrorNotes:
    """Collects contained failures as ``"<what> failed: <Type>: <msg>"``; under ``raise`` holds the first cause.

    A failure that repeats word for word (a sink failing the same way batch after batch) is kept once, with
    how often it happened; it is logged the first time and again at every power of ten.
    """

    def __init__(self, run_id: str, on_error: OnError) -> None:
        self.run_id = run_id
        self.on_error = on_error
        self._counts: dict[str, int] = {}
        self._held: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def errors(self) -> list[str]:
        """Each distinct failure once, in the order they first happened, with a count when it repeated."""
        with self._lock:
            counts = list(self._counts.items())
        return [line if count == 1 else f"{line} ({count} times)" for line, count in counts]

    @property
    def first_error(self) -> str | None:
        with self._lock:
            return next(iter(self._counts), None)

    def note(self, what: str, error: BaseException, *, surface: bool = True) -> None:
        """``surface=False``: a failure of the run's own bookkeeping on disk, which ``raise`` never raises."""
        line = f"{what} failed: {describe(error)}"
        with self._lock:
            count = self._counts[line] = self._counts.get(line, 0) + 1
            if self.on_error == "raise" and surface:
                if self._held is None:
                    self._held = error
                return
        if count == 1:
            _logger.warning("Run %s: %s", self.run_id, line)
        elif _is_power_of_ten(count):
            _logger.warning("Run %s: %s (%d times so far)", self.run_id, line, count)

    def note_sink_failure(self, sink: str, error: BaseException) -> None:
        self.note(f"writing to the {sink} sink", error)

    def take_held(self) -> BaseException | None:
        with self._lock:
            held, self._held = self._held, None
        return held

    def raise_held(self) -> None:
        held = self.take_held()
        if held is not None:
            raise held

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._held = None


def _is_power_of_ten(count: int) -> bool:
    digits = str(count)
    return digits == "1" + "0" * (len(digits) - 1)
