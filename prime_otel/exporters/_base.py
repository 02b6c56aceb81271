"""What every sink exporter shares: the write contract, its counters, and the OTel ``SpanExporter`` face."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_logger = logging.getLogger(__name__)

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


class Sink(Protocol):
    """What a processor needs of a sink; ``write`` raises on loss (``SinkWriteError`` for a partial one)."""

    name: str
    enabled: bool
    stats: SinkStats

    def write(self, items: Sequence[Any]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def reset_after_fork(self) -> None: ...

    @property
    def quiet_off_reason(self) -> str | None: ...


class RecordExporter(SpanExporter):
    """A sink: writes record spans to one platform destination.

    ``write`` raises on loss (``SinkWriteError`` for a partial one) so the processor can count and
    strike; ``export`` is the plain OpenTelemetry face that never raises.
    """

    name: str = "sink"

    def __init__(self) -> None:
        self.enabled = True
        self.stats = SinkStats()
        self.on_rejected: RejectionListener | None = None
        self._stats_lock = threading.Lock()
        self._warned_rejections: set[str] = set()

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        raise NotImplementedError

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.enabled:
            return SpanExportResult.FAILURE
        try:
            self.write(spans)
        except Exception as exc:
            _logger.warning("the %s sink failed to write %d spans: %s", self.name, len(spans), exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def flush(self) -> None:
        """Called by a flush barrier once everything queued before it was written."""

    def close(self) -> None:
        """Release connections; called once, after the last write."""

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flush()
        return True

    def reset_after_fork(self) -> None:
        """Drop (never close or flush) whatever the parent owns; subclasses call this first."""
        self._stats_lock = threading.Lock()

    @property
    def quiet_off_reason(self) -> str | None:
        """Why the sink disabled itself without loss (for example, traces outside the beta), else None."""
        return None

    def _reject(self, count: int, reason: str, record_id: object = None) -> None:
        """Records this sink will never store, whatever its state (a platform limit, a platform rejection): the write
        goes on with the others, and these are counted failed with ``reason`` by ``on_rejected``."""
        first = reason not in self._warned_rejections
        self._warned_rejections.add(reason)
        _logger.log(
            logging.WARNING if first else logging.DEBUG,
            "the %s sink cannot store a record (id %r): %s; it is counted as failed%s",
            self.name,
            record_id,
            reason,
            " (further ones with this reason are counted without a warning)" if first else "",
        )
        if self.on_rejected is not None:
            self.on_rejected(count, reason)

    def _count(self, delivered: int = 0, requests: int = 0, sent_bytes: int = 0, skipped: int = 0) -> None:
        with self._stats_lock:
            self.stats.delivered += delivered
            self.stats.requests += requests
            self.stats.bytes += sent_bytes
            self.stats.skipped += skipped
