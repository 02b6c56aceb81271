"""Per-sink failure accounting: strikes, retirement, the pause, the spool, and counted losses."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._spool import RunSpool
from ..client import ATTEMPT_LISTENER, is_ambiguous
from ..errors import is_record_rejection, is_transient
from ..exporters._base import Sink, SinkWriteError

_logger = logging.getLogger(__name__)

STRIKES_TO_RETIRE = 3
TRAINING_PAUSE_SECONDS = 300.0
REPLAY_CHUNK = 256

FailureListener = Callable[[str, BaseException], None]


class SinkSlot:
    """Wraps one sink inside an uploader.

    Three consecutive transient failures retire the sink, or pause it for ``pause_seconds`` when set
    (training runs outlive platform deploys; with a spool every sink pauses). A permanent failure retires
    at once; a record rejection costs only its batch. With a spool, what the sink could not take is kept
    there and replayed once the sink writes again; what a non-idempotent request may already have applied
    is reported as possibly missing instead.
    """

    def __init__(
        self,
        exporter: Sink,
        *,
        pause_seconds: float | None = None,
        on_failure: FailureListener | None = None,
        clock: Callable[[], float] = time.monotonic,
        spool: RunSpool | None = None,
    ) -> None:
        self.exporter = exporter
        self.failed = 0
        # Why records failed on this sink: a short reason (kind of problem) -> how many records.
        self.failure_reasons: collections.Counter[str] = collections.Counter()
        self.strikes = 0
        self.retired = False
        self.spool = spool
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

    @property
    def replay_safe(self) -> bool:
        """Whether a request that failed ambiguously may be sent again (idempotent or content-addressed)."""
        return bool(getattr(self.exporter, "replay_safe", False))

    @property
    def pending(self) -> int:
        return len(self.spool.sink(self.name).pending) if self.spool is not None else 0

    def dispatch(self, items: Sequence[Any], seqs: Sequence[int] | None = None) -> None:
        self._revive_if_cooled_down()
        self._write(items, seqs, replayed=False)

    def _write(self, items: Sequence[Any], seqs: Sequence[int] | None, *, replayed: bool) -> bool:
        spool = self.spool if seqs is not None else None
        if not self.exporter.enabled:
            if self.exporter.quiet_off_reason:
                if spool is not None:
                    spool.settle(self.name, seqs or [], replayed=replayed)
                return False
            if spool is not None and not replayed:
                spool.defer(self.name, seqs or [])
            elif spool is None and self.retired:
                self.add_failed(len(items))
            return False
        token = None
        if spool is not None and not self.replay_safe:
            batch = list(seqs or [])
            token = ATTEMPT_LISTENER.set(lambda sending: spool.mark_inflight(self.name, batch if sending else []))
        try:
            self.exporter.write(items)
        except SinkWriteError as exc:
            self._account(items, seqs, replayed, exc.cause, exc.lost_positions(len(items)), exc.ambiguous_positions)
            self._fail(exc.cause)
            return False
        except Exception as exc:
            self._account(items, seqs, replayed, exc, list(range(len(items))), [])
            self._fail(exc)
            return False
        finally:
            if token is not None:
                ATTEMPT_LISTENER.reset(token)
        self.strikes = 0
        if spool is not None:
            spool.settle(self.name, seqs or [], replayed=replayed)
        return True

    def _account(
        self,
        items: Sequence[Any],
        seqs: Sequence[int] | None,
        replayed: bool,
        error: BaseException,
        lost: Sequence[int],
        ambiguous: Sequence[int],
    ) -> None:
        """Split a failed batch: delivered, kept for a replay, possibly applied (never resent), or lost."""
        if self.spool is None or seqs is None:
            self.add_failed(len(lost) + len(ambiguous))
            return
        maybe_applied = set(ambiguous)
        if not self.replay_safe and is_ambiguous(error):
            maybe_applied |= set(lost)
        keep = [seqs[i] for i in lost if i not in maybe_applied]
        failed_positions = set(lost) | maybe_applied
        delivered = [seqs[i] for i in range(len(items)) if i not in failed_positions]
        if delivered:
            self.spool.settle(self.name, delivered, replayed=replayed)
        if maybe_applied:
            self.spool.mark_missing(self.name, [seqs[i] for i in sorted(maybe_applied)])
        if keep:
            if replayed:
                self.spool.mark_inflight(self.name, [])
            else:
                self.spool.defer(self.name, keep)

    def replay(self, build: Callable[[list[Any]], list[Any]], *, force: bool = False) -> int:
        """Send up to one chunk of this sink's spooled records; how many reached it."""
        spool = self.spool
        if spool is None:
            return 0
        if force and not self.exporter.quiet_off_reason and not self.exporter.enabled:
            self._revive("a last try at the end of the run")
        self._revive_if_cooled_down()
        if not self.exporter.enabled or (self.strikes and not force):
            return 0  # replay into a sink that just failed only when the run is ending
        seqs = spool.oldest_pending(self.name, REPLAY_CHUNK)
        if not seqs:
            return 0
        spooled = spool.read(seqs)
        found = [record.seq for record in spooled]
        if len(found) < len(seqs):
            absent = sorted(set(seqs) - set(found))
            spool.mark_missing(self.name, absent)
            _logger.warning("the spool lost %d records of the %s sink (its log was removed)", len(absent), self.name)
        if not spooled:
            return 0
        return len(found) if self._write(build(spooled), found, replayed=True) else 0

    def reset_after_fork(self) -> None:
        """The parent's uploader may have held the lock at the fork; the child's copy would never be released."""
        self._lock = threading.Lock()
        self.exporter.reset_after_fork()

    def add_failed(self, count: int, reason: str | None = None) -> None:
        if count <= 0:
            return
        with self._lock:
            self.failed += count
            if reason:
                self.failure_reasons[reason] += count

    def _revive_if_cooled_down(self) -> None:
        if self._cooldown_until is None or self._clock() < self._cooldown_until:
            return
        self._revive("after its pause")

    def _revive(self, why: str) -> None:
        self._cooldown_until = None
        self.retired = False
        self.strikes = 0
        self.exporter.enabled = True
        _logger.info("the %s sink is writing again %s", self.name, why)

    def _fail(self, error: BaseException) -> None:
        if is_record_rejection(error):
            _logger.warning(
                "the %s sink rejected a batch (%s: %s); it stays enabled", self.name, type(error).__name__, error
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
