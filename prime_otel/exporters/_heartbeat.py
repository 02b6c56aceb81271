"""A producer's liveness signal on the OTLP path: one small call every interval, on a daemon thread, until the
process's part of the run ends (or the process dies, which is the point: then the gateway's lease runs out)."""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable

from .. import _conventions as conv

_logger = logging.getLogger(__name__)


def heartbeat_interval(environ: dict[str, str] | None = None) -> float:
    """Seconds between heartbeats from ``PRIME_OTEL_HEARTBEAT_SECONDS`` (default 30); 0 turns them off."""
    text = (os.environ if environ is None else environ).get(conv.HEARTBEAT_SECONDS_ENV, "").strip()
    if not text:
        return conv.DEFAULT_HEARTBEAT_SECONDS
    try:
        value = float(text)
    except ValueError:
        _logger.warning("%s=%r is not a number of seconds; using %g", conv.HEARTBEAT_SECONDS_ENV, text, 30.0)
        return conv.DEFAULT_HEARTBEAT_SECONDS
    return value if math.isfinite(value) and value > 0 else 0.0


class Heartbeat:
    """Calls ``beat`` every ``interval`` seconds on its own daemon thread until ``stop``."""

    def __init__(self, beat: Callable[[], None], interval: float) -> None:
        self._beat = beat
        self._interval = interval
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._interval <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="prime-otel-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's heartbeat is the parent's (the child has no such thread)."""
        self._stopped = threading.Event()
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._beat()
            except Exception as exc:  # a missed heartbeat is only a missed heartbeat; the next one may get through
                _logger.debug("a heartbeat could not be sent: %s", exc)
