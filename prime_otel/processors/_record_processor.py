"""The records processor: episodes and bare traces, as spans, to every record sink."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .._conventions import EPISODE_ID, EPISODE_SPAN, RECORD_JSON, RECORD_MAP
from ..records import (
    RECORD_SPAN_NAMES,
    PlainRecordSpan,
    RecordSpan,
    UnencodableRecord,
    child_summary,
    record_from_attributes,
    record_kind,
    why_unencodable,
)
from ._genai import GenAIEpisodes, PendingEpisode
from ._slot import SinkSlot
from ._spool import RunSpool, SpooledRecord
from ._uploader import DEFAULT_MAX_QUEUE_BATCHES, DEFAULT_PUT_TIMEOUT_SECONDS, Uploader

_logger = logging.getLogger(__name__)


class RecordProcessor(Uploader[RecordSpan], SpanProcessor):
    """Delivers ``episode`` and ``trace`` spans, ended through a tracer or submitted as producer records."""

    def __init__(
        self,
        slots: Sequence[SinkSlot[RecordSpan]],
        resource: Resource,
        *,
        max_queue_batches: int = DEFAULT_MAX_QUEUE_BATCHES,
        put_timeout: float = DEFAULT_PUT_TIMEOUT_SECONDS,
        thread_name: str = "prime-otel-uploader",
        spool: RunSpool | None = None,
    ) -> None:
        super().__init__(
            slots, max_queue_batches=max_queue_batches, put_timeout=put_timeout, thread_name=thread_name, spool=spool
        )
        self._resource = resource
        self._children: dict[int, list[dict[str, Any]]] = {}
        self._children_lock = threading.Lock()
        self._unrecorded = 0
        self._warned_reasons: set[str] = set()
        #: Episode spans without a record are assembled from the GenAI spans under them.
        self.genai = GenAIEpisodes()
        #: Also handed every prepared batch of record spans (the OTLP tee); it must not block.
        self.tee: Callable[[list[Any]], None] | None = None

    def submit(self, records: list[Any]) -> bool:
        """Queue one producer batch (the fast path of ``log_episodes``: spans are made on the uploader thread)."""
        return self._put(record_kind(records[0]), records) if records else True

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if span.name in RECORD_SPAN_NAMES:
            with self._children_lock:
                self._children[span.context.span_id] = []
        self.genai.on_start(span)

    def on_end(self, span: ReadableSpan) -> None:
        pending = self.genai.on_end(span)
        if pending is not None:
            with self._children_lock:
                self._children.pop(span.context.span_id, None)
            self._put(EPISODE_SPAN, [pending])
            return
        if span.name not in RECORD_SPAN_NAMES:
            self._adopt_child(span)
            return
        with self._children_lock:
            children = self._children.pop(span.context.span_id, [])
        record = record_from_attributes(span.attributes or {})
        if record is None:
            self._unrecorded += 1
            if self._unrecorded == 1:
                _logger.warning(
                    "an %r span without a %s or %s attribute (and without GenAI spans under it) carries no record; "
                    "it reaches no sink",
                    span.name,
                    RECORD_JSON,
                    RECORD_MAP,
                )
            return
        self._put(span.name, [PlainRecordSpan(span, record, children)])

    def _adopt_child(self, span: ReadableSpan) -> None:
        parent = span.parent
        if parent is None:
            return
        with self._children_lock:
            siblings = self._children.get(parent.span_id)
            if siblings is not None:
                siblings.append(child_summary(span))

    def _deliver(self, items: list[Any]) -> None:
        spans = self._prepare(items)
        if spans:
            if self.tee is not None:
                self.tee(spans)
            self._dispatch_to_slots(spans, self._log(spans[0].name, spans))

    def _prepare(self, items: list[Any]) -> list[RecordSpan]:
        """Spans of the producer's records, each encoded here once. A record that cannot be encoded, or has no
        string id, is left out: counted as failed on every sink (with why) and never spooled, so it costs only
        itself."""
        logged_at = time.time_ns()
        spans: list[RecordSpan] = []
        for item in items:
            try:
                span: RecordSpan
                if isinstance(item, PendingEpisode):
                    span = item.record_span()
                else:
                    span = item if isinstance(item, RecordSpan) else RecordSpan(item, self._resource, logged_at)
                _encode_and_check(span)
            except Exception as error:
                self._count_unusable(item, why_unencodable(error))
                continue
            spans.append(span)
        return spans

    def _count_unusable(self, item: Any, reason: str) -> None:
        for slot in self.slots:
            if not slot.sink.quiet_off_reason:
                slot.add_failed(1, reason)
        first = reason not in self._warned_reasons
        self._warned_reasons.add(reason)
        _logger.log(
            logging.WARNING if first else logging.DEBUG,
            "a %s record (id %s) reaches no sink: %s; it is counted as failed on every sink%s",
            type(item.record if isinstance(item, RecordSpan) else item).__name__,
            _id_of(item),
            reason,
            " (further ones with this reason are counted without a warning)" if first else "",
        )

    def _spool_kinds(self, kind: str, items: Sequence[RecordSpan]) -> str | list[str]:
        return [span.name for span in items]

    def _encode_for_spool(self, items: Sequence[RecordSpan]) -> list[bytes]:
        return [span.encoded().plain for span in items]

    def _from_spool(self, records: list[SpooledRecord]) -> list[RecordSpan]:
        logged_at = time.time_ns()
        return [RecordSpan(record.record, self._resource, logged_at) for record in records]

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self._children = {}
        self._children_lock = threading.Lock()
        self.genai.reset_after_fork()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.flush(timeout_millis / 1000.0)

    def shutdown(self) -> None:
        self.close(self.shutdown_timeout)


def _encode_and_check(span: RecordSpan) -> None:
    """Encodes the record (raising :class:`UnencodableRecord`) and checks that it has a non-empty string id."""
    encoded = span.encoded()
    record_id = (span.attributes or {}).get(EPISODE_ID)
    if record_id is None:
        record_id = encoded.record.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise UnencodableRecord("record without a string id")


def _id_of(item: Any) -> str:
    record = item.record if isinstance(item, RecordSpan) else item
    record_id = record.get("id") if isinstance(record, dict) else getattr(record, "id", None)
    return repr(record_id[:64]) if isinstance(record_id, str) else "unknown"
