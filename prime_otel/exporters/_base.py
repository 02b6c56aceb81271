"""What every record sink exporter shares: the OTel ``SpanExporter`` face over the sink contract of ``_sink.py``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._sink import RejectionListener, SinkStats

_logger = logging.getLogger(__name__)


class RecordSink(SpanExporter):
    """A sink: writes record spans to one platform destination.

    ``write`` raises on loss (``SinkWriteError`` for a partial one) so the processor can count and
    strike; ``export`` is the plain OpenTelemetry face that never raises.
    """

    name: str = "sink"
    #: The sink whose outcome for a batch this one waits for before writing it (set when it writes only while that
    #: one cannot); None: it writes independently.
    follows: str | None = None
    #: See ``Sink``: a repeat stores nothing twice; the sink names each request's records as it succeeds.
    replay_safe: bool = False
    reports_requests: bool = False

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

    def _count_request(self, sent_bytes: int) -> None:
        """One HTTP attempt of this sink (``metered_requests``), whatever became of it."""
        self._count(requests=1, sent_bytes=sent_bytes)

    def _count(self, delivered: int = 0, requests: int = 0, sent_bytes: int = 0, skipped: int = 0) -> None:
        with self._stats_lock:
            self.stats.delivered += delivered
            self.stats.requests += requests
            self.stats.bytes += sent_bytes
            self.stats.skipped += skipped
