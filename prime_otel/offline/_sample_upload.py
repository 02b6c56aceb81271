"""The sample rows of an offline eval (``samples.jsonl``), appended exactly once however often a sync is cut short.

The sample table is append-only and takes no idempotency key, so before each ``POST …/samples`` the request's
intent (the file range it carries and the keys of its rows) is written to the sync's ledger. After an ambiguous
answer, or when a sync starts and finds an intent left by one that was interrupted, the evaluation's stored rows
are read back: every row stored means applied, none stored on two reads a settle apart means not applied (sent
again), anything else is reported as possibly missing and never resent. An answer that proves nothing was
stored (a 4xx, a 500, a refused connection) leaves the rows for the next try; a 4xx refusing what a request
carries is split until only the refused rows are left, and those are counted as refused with the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..client import EvaluationsAPI, StoredSamples, sample_key
from ..client._readback import SETTLE_SECONDS, SampleKey
from ..errors import failure_reason, is_ambiguous, is_record_rejection

_logger = logging.getLogger("prime_otel")

#: Sends of one request at most: the first, and one after a read-back proved it was not stored.
SEND_ATTEMPTS = 2
#: A request an interrupted sync left in flight counts as not stored only when it is at least this old: the
#: server may still be applying a request whose client was killed a moment ago.
RESUME_SETTLE_SECONDS = 5.0
_SPLIT_ON = frozenset({400, 413, 422})
_BODY_OPEN, _BODY_CLOSE = b'{"samples":[', b"]}"


@dataclass(frozen=True)
class SampleRequest:
    """Rows of ``samples.jsonl`` sent as one request: the file range they cover, and each row's JSON, key and
    the offset just past its line."""

    start: int
    rows: Sequence[bytes]
    keys: Sequence[list[str] | None]
    ends: Sequence[int]

    @property
    def end(self) -> int:
        return self.ends[-1] if self.ends else self.start

    def body(self) -> bytes:
        return b"".join((_BODY_OPEN, b",".join(self.rows), _BODY_CLOSE))

    def halves(self) -> tuple[SampleRequest, SampleRequest]:
        """Two requests of half the rows each; the first ends where its last row's line ends."""
        half = len(self.rows) // 2
        first = SampleRequest(self.start, self.rows[:half], self.keys[:half], self.ends[:half])
        return first, SampleRequest(first.end, self.rows[half:], self.keys[half:], self.ends[half:])


def row_key(row: Any) -> list[str] | None:
    key = sample_key(row)
    return list(key) if key is not None else None


class SampleLedger(Protocol):
    """What the uploader keeps in the sync's ledger (see :class:`prime_otel.offline._sync.SyncLedger`)."""

    sample_intent: dict[str, Any] | None
    possibly_missing: list[dict[str, Any]]
    refused: dict[str, dict[str, int]]
    delivered: dict[str, int]


class SampleUploader:
    """Appends sample requests to one evaluation, writing each one's intent first and settling it after."""

    sink = "eval_samples"

    def __init__(
        self,
        api: EvaluationsAPI,
        evaluation_id: str,
        ledger: SampleLedger,
        *,
        save: Callable[[], None],
        advance: Callable[[int], None],
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = api
        self._evaluation_id = evaluation_id
        self._ledger = ledger
        self._save = save
        self._advance = advance
        self._sleep = sleep
        self._clock = clock
        #: Rows this sync stored (read back or acknowledged).
        self.stored = 0
        self.requests = 0

    def resume(self) -> None:
        """Settle the request an interrupted sync left in flight, from what the evaluation stored."""
        intent = self._ledger.sample_intent
        if intent is None:
            return
        keys = [key if key is None else list(key) for key in intent.get("keys", [])]
        ends = [int(intent["end"])] * len(keys)  # only the range's end matters once the rows are settled
        request = SampleRequest(int(intent["start"]), [b""] * len(keys), keys, ends)
        verdicts = read_back_in_flight(
            self._stored, _sample_keys(keys), float(intent.get("at", 0.0)), clock=self._clock, sleep=self._sleep
        )
        verdict = _verdict(verdicts)
        if verdict == "absent":
            _logger.info("the %d sample rows an interrupted sync was sending were not stored", len(keys))
            self._ledger.sample_intent = None
            self._save()
            return
        self._settle(request, verdict, "an interrupted sync")

    def send(self, request: SampleRequest) -> None:
        for attempt in range(SEND_ATTEMPTS):
            self._ledger.sample_intent = {
                "start": request.start,
                "end": request.end,
                "keys": list(request.keys),
                "at": self._clock(),
            }
            self._save()
            self.requests += 1
            try:
                self._api.append_samples(self._evaluation_id, request.body())
            except Exception as exc:
                if is_record_rejection(exc):
                    self._refused(request, exc)
                    return
                if not is_ambiguous(exc):
                    # Nothing was stored: the rows stay for the next try (this sync stops here).
                    self._ledger.sample_intent = None
                    self._save()
                    raise
                verdict = self._read_back(request)
                if verdict == "absent" and attempt + 1 < SEND_ATTEMPTS:
                    _logger.info("%d sample rows were not stored after %s; sending them again", len(request.rows), exc)
                    continue
                self._settle(request, verdict, str(exc))
                return
            self._settle(request, "stored", "")
            return

    def _refused(self, request: SampleRequest, error: BaseException) -> None:
        """A 4xx proves nothing of the request was stored; split it until only the refused rows are left."""
        if getattr(error, "status_code", None) in _SPLIT_ON and len(request.rows) > 1:
            self._ledger.sample_intent = None
            for half in request.halves():
                self.send(half)
            return
        reason = failure_reason(error)
        reasons = self._ledger.refused.setdefault(self.sink, {})
        reasons[reason] = reasons.get(reason, 0) + len(request.rows)
        _logger.warning("the platform refused %d sample rows for good: %s", len(request.rows), reason)
        self._ledger.sample_intent = None
        self._advance(request.end)

    def _settle(self, request: SampleRequest, verdict: str, cause: str) -> None:
        """One save moves the offset past the request and clears its intent."""
        rows = len(request.keys)
        if verdict == "stored":
            self.stored += rows
            self._ledger.delivered[self.sink] = self._ledger.delivered.get(self.sink, 0) + rows
        else:
            self._ledger.possibly_missing.append(
                {"file": "samples.jsonl", "start": request.start, "end": request.end, "rows": rows}
            )
            _logger.warning(
                "%d sample rows may be missing (%s; the stored rows could not prove either way); not resent",
                rows,
                cause,
            )
        self._ledger.sample_intent = None
        self._advance(request.end)

    def _read_back(self, request: SampleRequest) -> str:
        """``stored`` (every row, exactly once), ``absent`` (none, on two reads a settle apart) or ``unknown``."""
        return _verdict(self._stored(_sample_keys(request.keys)))

    def _stored(self, keys: Sequence[SampleKey | None]) -> list[bool | None]:
        """Per key: stored, absent on two reads a settle apart (every key absent on the first), or undecided."""
        try:
            verdicts = StoredSamples.read(self._api, self._evaluation_id).stored(keys)
            if verdicts and all(verdict is False for verdict in verdicts):
                self._sleep(SETTLE_SECONDS)
                verdicts = StoredSamples.read(self._api, self._evaluation_id).stored(keys)
        except Exception as exc:
            _logger.warning("could not read back %d sample rows: %s", len(keys), exc)
            return [None] * len(keys)
        return verdicts


def read_back_in_flight(
    read_back: Callable[[Sequence[SampleKey | None]], list[bool | None]],
    keys: Sequence[SampleKey | None],
    sent_at: float,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[bool | None]:
    """Per key, whether the rows of a request a killed client left in flight (sent at wall-clock ``sent_at``) are
    stored, absent or undecided. ``read_back`` proves absence on two reads a settle apart; a request younger than
    ``RESUME_SETTLE_SECONDS`` is read again once it is that old, since the server may still be applying it."""
    verdicts = read_back(keys)
    young = RESUME_SETTLE_SECONDS - (clock() - sent_at)
    if young > 0 and verdicts and all(verdict is False for verdict in verdicts):
        _logger.info("waiting %.0f s for the sample request a killed client left to settle", young)
        sleep(young)
        verdicts = read_back(keys)
    return verdicts


def _sample_keys(keys: Sequence[Sequence[str] | None]) -> list[SampleKey | None]:
    return [(key[0], key[1]) if key else None for key in keys]


def _verdict(verdicts: Sequence[bool | None]) -> str:
    if verdicts and all(verdict is True for verdict in verdicts):
        return "stored"
    if verdicts and all(verdict is False for verdict in verdicts):
        return "absent"
    return "unknown"
