"""Per-sink failure accounting: strikes, retirement, the training pause, and counted losses."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import is_record_rejection, is_transient
from ..exporters._base import Sink, SinkWriteError

_logger = logging.getLogger(__name__)

STRIKES_TO_RETIRE = 3
TRAINING_PAUSE_SECONDS = 300.0

FailureListener = Callable[[str, BaseException], None]


class SinkSlot:
    """Wraps one exporter inside a processor.

    Three consecutive transient failures retire the sink, or pause it for ``pause_seconds`` when set
    (training runs outlive platform deploys). A permanent failure retires at once; a record rejection
    costs only its batch.
    """

    def __init__(
        self,
        exporter: Sink,
        *,
        pause_seconds: float | None = None,
        on_failure: FailureListener | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.exporter = exporter
        self.failed = 0
        self.strikes = 0
        self.retired = False
        self._pause_seconds = pause_seconds
        self._cooldown_until: float | None = None
        self._on_failure = on_failure
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.exporter.name

    @property
    def paused(self) -> bool:
        return self._cooldown_until is not None

    def dispatch(self, spans: Sequence[Any]) -> None:
        self._revive_if_cooled_down()
        if not self.exporter.enabled:
            if self.retired:
                self.add_failed(len(spans))
            return
        try:
            self.exporter.write(spans)
        except SinkWriteError as exc:
            self._fail(exc.cause, exc.failed_records)
        except Exception as exc:
            self._fail(exc, len(spans))
        else:
            self.strikes = 0

    def add_failed(self, count: int) -> None:
        with self._lock:
            self.failed += count

    def _revive_if_cooled_down(self) -> None:
        if self._cooldown_until is None or self._clock() < self._cooldown_until:
            return
        self._cooldown_until = None
        self.retired = False
        self.strikes = 0
        self.exporter.enabled = True
        _logger.info("the %s sink is writing again after its pause", self.name)

    def _fail(self, error: BaseException, lost: int) -> None:
        if lost > 0:
            self.add_failed(lost)
        if is_record_rejection(error):
            _logger.warning(
                "the %s sink rejected a batch of %d records (%s: %s); it stays enabled",
                self.name,
                lost,
                type(error).__name__,
                error,
            )
        elif is_transient(error):
            self.strikes += 1
            if self.strikes < STRIKES_TO_RETIRE:
                _logger.warning(
                    "the %s sink failed (strike %d of %d): %s", self.name, self.strikes, STRIKES_TO_RETIRE, error
                )
            else:
                self._retire(error)
        else:
            self._retire(error, permanent=True)
        if self._on_failure is not None:
            self._on_failure(self.name, error)

    def _retire(self, error: BaseException, permanent: bool = False) -> None:
        self.exporter.enabled = False
        self.retired = True
        if self._pause_seconds is not None and not permanent:
            self._cooldown_until = self._clock() + self._pause_seconds
            _logger.warning(
                "the %s sink failed %d times in a row (%s); pausing it for %.0f s",
                self.name,
                STRIKES_TO_RETIRE,
                error,
                self._pause_seconds,
            )
        else:
            _logger.warning(
                "the %s sink is retired for the rest of the run: %s: %s", self.name, type(error).__name__, error
            )
