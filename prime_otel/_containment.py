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
    """Collects contained failures as ``"<what> failed: <Type>: <msg>"``; under ``raise`` holds the first cause."""

    def __init__(self, run_id: str, on_error: OnError) -> None:
        self.run_id = run_id
        self.on_error = on_error
        self.errors: list[str] = []
        self._held: BaseException | None = None
        self._lock = threading.Lock()

    def note(self, what: str, error: BaseException) -> None:
        line = f"{what} failed: {describe(error)}"
        with self._lock:
            self.errors.append(line)
            if self.on_error == "raise":
                if self._held is None:
                    self._held = error
                return
        _logger.warning("Run %s: %s", self.run_id, line)

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
