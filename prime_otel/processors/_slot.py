"""Per-sink failure accounting: strikes, retirement, the pause, the spool, and counted losses."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._attempts import ATTEMPT_LISTENER, REQUEST_PROGRESS, ROW_NUMBERING, NumberedRows
from .._sink import Record, RejectingSink, Sink, SinkWriteError
from ..errors import failure_reason, is_ambiguous, is_record_rejection, is_transient
from ._spool import RunSpool, SpooledRecord

_logger = logging.getLogger(__name__)

STRIKES_TO_RETIRE = 3
TRAINING_PAUSE_SECONDS = 300.0
REPLAY_CHUNK = 256

FailureListener = Callable[[str, BaseException], None]
#: The records a slot's sink takes (a slot for a sink of any span takes record spans too).
_RecordT = TypeVar("_RecordT", bound=Record, contravariant=True)


@dataclass
class _Split:
    """A failed batch by outcome, as positions: not applied (kept for a replay), possibly applied (never
    resent), and failed for good (each with its reason; never resent)."""

    lost: list[int]
    ambiguous: list[int]
    failed: dict[int, str]


class _WriteInFlight:
    """The durable in-flight marker of one write to a non-idempotent sink, as a context around it.

    A sink that reports its requests (``by_request``) gets a marker naming only the records a request under way
    may store, and the records each request stored settled before the next one goes out; what it never attempted
    stays for a replay after a crash. Any other sink's whole batch is marked for every attempt. A sink that numbers
    its rows says what it made of each record (``ROW_NUMBERING``): the numbers and row keys go to disk with the
    marker, so a sync can read the rows in flight back and number what it sends as the run did.
    """

    def __init__(self, spool: RunSpool, name: str, seqs: list[int], *, replayed: bool, by_request: bool) -> None:
        self._spool = spool
        self._name = name
        self._seqs = seqs
        self._replayed = replayed
        self._by_request = by_request
        self._carried: set[int] = set()
        #: Positions settled as delivered while the sink wrote.
        self.settled: set[int] = set()
        self._tokens: list[Any] = []

    def __enter__(self) -> _WriteInFlight:
        self._spool.begin_write(self._name, self._seqs)
        self._tokens = [
            ATTEMPT_LISTENER.set(self._attempt),
            REQUEST_PROGRESS.set(self if self._by_request else None),
            ROW_NUMBERING.set(self),
        ]
        return self

    def __exit__(self, *_: object) -> None:
        attempts, progress, numbering = self._tokens
        ROW_NUMBERING.reset(numbering)
        REQUEST_PROGRESS.reset(progress)
        ATTEMPT_LISTENER.reset(attempts)

    def end(self) -> None:
        self._spool.end_write(self._name, self._seqs)

    def given(self, position: int) -> int | None:
        return self._spool.given_number(self._name, self._seqs[position])

    def numbered(self, rows: Mapping[int, NumberedRows]) -> None:
        self._spool.note_rows(self._name, {self._seqs[position]: made for position, made in rows.items()})

    def _attempt(self, sending: bool) -> None:
        if not self._by_request:
            self._spool.mark_inflight(self._name, self._seqs if sending else [])
        elif sending:
            self._mark()

    def carrying(self, positions: Iterable[int]) -> None:
        self._carried.update(positions)

    def delivered(self, positions: Iterable[int]) -> None:
        fresh = [p for p in positions if p not in self.settled]
        if not fresh:
            return
        self.settled.update(fresh)
        self._carried.difference_update(fresh)
        self._spool.settle(self._name, [self._seqs[p] for p in fresh], replayed=self._replayed)
        self._spool.save()  # a crash after this request must not report it possibly missing

    def released(self, positions: Iterable[int]) -> None:
        self._carried.difference_update(positions)
        self._mark()

    def _mark(self) -> None:
        self._spool.mark_inflight(self._name, [self._seqs[p] for p in self._carried])


class SinkSlot(Generic[_RecordT]):
    """Wraps one sink inside an uploader.

    Three consecutive transient failures retire the sink, or pause it for ``pause_seconds`` when set
    (training runs outlive platform deploys; with a spool every sink pauses). A permanent failure retires
    at once; a record rejection costs only the records refused, counted failed with the platform's reason and
    never kept for a replay (it would be refused again). With a spool, what the sink could not take is kept
    there and replayed once the sink writes again; what a non-idempotent request may already have applied
    (and the sink could not read back) is reported as possibly missing instead.
    """

    def __init__(
        self,
        sink: Sink[_RecordT],
        *,
        pause_seconds: float | None = None,
        on_failure: FailureListener | None = None,
        clock: Callable[[], float] = time.monotonic,
        spool: RunSpool | None = None,
    ) -> None:
        self.sink = sink
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
        if isinstance(sink, RejectingSink):
            # What a sink refuses for what the record is (a platform limit) is counted on its slot, with why.
            sink.on_rejected = self.add_failed

    @property
    def name(self) -> str:
        return self.sink.name

    @property
    def paused(self) -> bool:
        return self._cooldown_until is not None

    @property
    def replay_safe(self) -> bool:
        """Whether a request that failed ambiguously may be sent again (idempotent or content-addressed)."""
        return self.sink.replay_safe

    @property
    def reports_requests(self) -> bool:
        """Whether the sink says, request by request, which records of a batch each carries (``REQUEST_PROGRESS``)."""
        return self.sink.reports_requests

    @property
    def pending(self) -> int:
        return len(self.spool.sink(self.name).pending) if self.spool is not None else 0

    def dispatch(self, items: Sequence[_RecordT], seqs: Sequence[int] | None = None) -> None:
        self._revive_if_cooled_down()
        self._write(items, seqs, replayed=False)

    def _write(self, items: Sequence[_RecordT], seqs: Sequence[int] | None, *, replayed: bool) -> bool:
        spool = self.spool if seqs is not None else None
        if not self.sink.enabled:
            if self.sink.quiet_off_reason:
                if spool is not None:
                    spool.settle(self.name, seqs or [], replayed=replayed)
                return False
            if spool is not None and not replayed:
                spool.defer(self.name, seqs or [])
            elif spool is None and self.retired:
                # Without seqs a spool refused the batch: that is why these records are lost, not the retirement.
                refused = self.spool.refusal_reason if self.spool is not None else None
                self.add_failed(len(items), refused or "sink retired")
            return False
        if spool is None or self.replay_safe:
            return self._send(items, seqs, replayed, None)
        batch = list(seqs or [])
        progress = _WriteInFlight(spool, self.name, batch, replayed=replayed, by_request=self.reports_requests)
        try:
            return self._send(items, seqs, replayed, progress)
        finally:
            progress.end()

    def _send(
        self, items: Sequence[_RecordT], seqs: Sequence[int] | None, replayed: bool, progress: _WriteInFlight | None
    ) -> bool:
        try:
            with progress if progress is not None else contextlib.nullcontext():
                self.sink.write(items)
        except SinkWriteError as exc:
            self._account(seqs, replayed, exc.cause, self._split(exc.cause, len(items), exc), progress)
            self._fail(exc.cause)
            return False
        except Exception as exc:
            self._account(seqs, replayed, exc, self._split(exc, len(items), None), progress)
            self._fail(exc)
            return False
        self.strikes = 0
        if self.spool is not None and seqs is not None:
            settled = progress.settled if progress is not None else set()
            self.spool.settle(self.name, [s for p, s in enumerate(seqs) if p not in settled], replayed=replayed)
        return True

    def _split(self, error: BaseException, batch_size: int, written: SinkWriteError | None) -> _Split:
        """Which positions of a failed batch were not applied, may have been, or failed for good. A sink that
        says so is believed; otherwise the error decides for the positions it names (the whole batch)."""
        if written is not None and written.has_positions:
            lost, ambiguous = written.lost_positions(batch_size), written.ambiguous_positions
            failed = dict(written.failed_positions)
        else:
            lost = written.lost_positions(batch_size) if written is not None else list(range(batch_size))
            ambiguous, failed = [], {}
            if not self.replay_safe and is_ambiguous(error) and not is_record_rejection(error):
                lost, ambiguous = [], lost
        if not failed and is_record_rejection(error):
            # Refused for good: sending the same records again would be refused again.
            failed, lost = {position: failure_reason(error) for position in lost}, []
        if self.replay_safe:
            lost, ambiguous = sorted({*lost, *ambiguous}), []
        return _Split(list(lost), list(ambiguous), failed)

    def _account(
        self,
        seqs: Sequence[int] | None,
        replayed: bool,
        error: BaseException,
        split: _Split,
        progress: _WriteInFlight | None = None,
    ) -> None:
        """Settle a failed batch: delivered, kept for a replay, possibly applied (never resent), or failed. What
        the sink reported delivered while it wrote is settled already."""
        for reason, count in collections.Counter(split.failed.values()).items():
            self.add_failed(count, reason)
        spool = self.spool
        if spool is None or seqs is None:
            self.add_failed(len(split.lost) + len(split.ambiguous), failure_reason(error))
            return
        if split.failed:
            spool.fail(self.name, [seqs[i] for i in sorted(split.failed)])
        settled = progress.settled if progress is not None else set()
        undelivered = {*split.lost, *split.ambiguous, *split.failed}
        delivered = [seq for i, seq in enumerate(seqs) if i not in undelivered and i not in settled]
        if delivered:
            spool.settle(self.name, delivered, replayed=replayed)
        if split.ambiguous:
            spool.mark_missing(self.name, [seqs[i] for i in sorted(split.ambiguous)])
        if split.lost and not replayed:
            spool.defer(self.name, [seqs[i] for i in split.lost])

    def replay(self, build: Callable[[list[SpooledRecord]], list[_RecordT]], *, force: bool = False) -> int:
        """Send up to one chunk of this sink's spooled records; how many reached it."""
        spool = self.spool
        if spool is None:
            return 0
        if force and not self.sink.quiet_off_reason and not self.sink.enabled:
            self._revive("a last try at the end of the run")
        self._revive_if_cooled_down()
        if not self.sink.enabled or (self.strikes and not force):
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
        self.sink.reset_after_fork()

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
        self.sink.enabled = True
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
        self.sink.enabled = False
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
