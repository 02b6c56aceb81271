"""A live one-line status on an interactive terminal: records sent, queued, spooled, and failures.

Opt-in (``init(status_line=True)`` or ``PRIME_OTEL_STATUS_LINE=1``; on by default for zero-code runs, where the
producer draws nothing of its own), so it never fights a producer's terminal UI (verifiers draws a live
dashboard). Quiet whenever stderr is not a terminal (logs, CI), even when asked for.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

_CLEAR_TO_END = "\x1b[K"


@dataclass(frozen=True)
class Progress:
    sent: int
    queued: int
    spooled: int
    failed: int


class StatusLine:
    def __init__(
        self, run_id: str, progress: Callable[[], Progress], stream: TextIO | None = None, interval: float = 1.0
    ) -> None:
        self._run_id = run_id
        self._progress = progress
        self._stream = stream if stream is not None else sys.stderr
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty and isatty())

    def start(self) -> None:
        if not self.enabled:
            return
        self._thread = threading.Thread(target=self._loop, name="prime-otel-status", daemon=True)
        self._thread.start()

    def render(self) -> str:
        p = self._progress()
        return f"prime-otel {self._run_id}: sent {p.sent}  queued {p.queued}  spooled {p.spooled}  failed {p.failed}"

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._stream.write("\r" + self.render() + _CLEAR_TO_END)
                self._stream.flush()
            except (OSError, ValueError):
                return

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(2.0)
        try:
            self._stream.write("\r" + _CLEAR_TO_END)
            self._stream.flush()
        except (OSError, ValueError):
            pass
