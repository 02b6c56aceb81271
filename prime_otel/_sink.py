"""The sink contract every processor writes through and every sink keeps: ``Sink``, what it writes
(``Record``), its counters, its partial failure, and the listener a sink tells about the records it refuses for
good."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "MetricsRow",
    "Record",
    "RecordT",
    "RejectingSink",
    "RejectionListener",
    "Sink",
    "SinkStats",
    "SinkWriteError",
]

#: One step's metrics as a metrics sink writes it: ``step``, an optional ``_timestamp``, each metric's value.
MetricsRow = Mapping[str, Any]
#: What a sink writes: a finished ``episode``/``trace`` span carrying a producer's record, or a step's metrics row.
Record = ReadableSpan | MetricsRow
#: The kind of record one sink (or one uploader's sinks) takes.
RecordT = TypeVar("RecordT", bound=Record)
_RecordT_contra = TypeVar("_RecordT_contra", bound=Record, contravariant=True)

#: Told ``(count, reason)`` about records a sink will never store for what they are (the run counts them failed).
RejectionListener = Callable[[int, str], None]


class SinkWriteError(Exception):
    """Part of a batch was not stored; ``cause`` is the error reported for strike accounting.

    ``lost`` are the positions (in the batch) that were certainly not applied; ``ambiguous`` those a
    non-idempotent request may have applied before failing; ``failed`` those that failed for good (a record
    rejection), each with its reason, never to be resent. Without positions, the last ``failed_records`` items
    count as lost.
    """

    def __init__(
        self,
        cause: BaseException,
        failed_records: int,
        *,
        lost: Sequence[int] | None = None,
        ambiguous: Sequence[int] = (),
        failed: Mapping[int, str] | None = None,
    ) -> None:
        super().__init__(f"{failed_records} records lost: {type(cause).__name__}: {cause}")
        self.cause = cause
        self.failed_records = failed_records
        self._lost = None if lost is None else list(lost)
        self.ambiguous_positions = list(ambiguous)
        self.failed_positions = dict(failed or {})

    @property
    def has_positions(self) -> bool:
        """Whether the sink said which positions had which outcome (else the slot classifies by ``cause``)."""
        return self._lost is not None or bool(self.ambiguous_positions or self.failed_positions)

    def lost_positions(self, batch_size: int) -> list[int]:
        if self._lost is not None:
            return self._lost
        count = max(0, self.failed_records - len(self.ambiguous_positions) - len(self.failed_positions))
        return list(range(batch_size - count, batch_size))


@dataclass
class SinkStats:
    """Counters a sink keeps about its own deliveries (the processor keeps failures and drops)."""

    delivered: int = 0
    requests: int = 0
    bytes: int = 0
    skipped: int = 0


class Sink(Protocol[_RecordT_contra]):
    """What a processor needs of a sink; ``write`` raises on loss (``SinkWriteError`` for a partial one).

    ``replay_safe``: a repeat of a request the platform already applied stores nothing twice (content-addressed,
    or merged per key), so a failed or interrupted write may simply be sent again. ``reports_requests``: the sink
    names each request's records as it succeeds (``SinkWriteError`` positions), so only the request in flight is
    possibly missing after a crash.
    """

    name: str
    enabled: bool
    stats: SinkStats
    replay_safe: bool
    reports_requests: bool

    def write(self, items: Sequence[_RecordT_contra]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def reset_after_fork(self) -> None: ...

    @property
    def quiet_off_reason(self) -> str | None: ...


@runtime_checkable
class RejectingSink(Protocol):
    """A sink that tells ``on_rejected`` about the records it will never store (the slot counts them failed)."""

    on_rejected: RejectionListener | None
